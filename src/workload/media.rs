//! Synthetic images and audio for chat requests (AIPerf's `--image-*` and `--audio-*`
//! flags): each request's user message carries its text and, after it, its images as
//! `image_url` parts with `data:` URLs and its audio as `input_audio` parts, the OpenAI chat
//! API's content parts. Sizes are drawn per item from the seed, pixels and samples are seeded
//! noise (so a server's cache never sees two alike), and everything is encoded before the
//! clock starts.

use base64::Engine as _;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{MediaBudget, MediaError, WorkloadError};

/// The largest image side drawn (pixels).
pub const MAX_SIDE: u32 = 8192;
/// The longest audio clip drawn (seconds).
pub const MAX_SECONDS: f64 = 600.0;
/// The most media bytes one run prepares (before base64), checked up front from the means
/// and three standard deviations.
pub const MAX_BYTES: f64 = 4.0 * (1u64 << 30) as f64;

/// An image encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    /// PNG (lossless: about 3 bytes a pixel of noise).
    Png,
    /// JPEG (quality 75, Pillow's default, which AIPerf and vLLM both encode with).
    Jpeg,
    /// PNG or JPEG, drawn per image.
    Random,
}

/// Images in every request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageSpec {
    /// Width in pixels: mean, standard deviation.
    pub width: (f64, f64),
    /// Height in pixels: mean, standard deviation.
    pub height: (f64, f64),
    /// Sizes to draw from instead, by weight: width, height, weight (vLLM's `random-mm`
    /// buckets).
    #[serde(default)]
    pub sizes: Vec<(u32, u32, f64)>,
    /// Encoding.
    pub format: ImageFormat,
    /// Images per request: fewest, most (drawn uniformly between them, both included).
    pub per_request: (u32, u32),
}

impl ImageSpec {
    /// One image's width and height.
    fn size(&self, rng: &mut impl Rng) -> (u32, u32) {
        if self.sizes.is_empty() {
            let mut side = |d| normal(rng, d).round().clamp(1.0, f64::from(MAX_SIDE)) as u32;
            return (side(self.width), side(self.height));
        }
        let total: f64 = self.sizes.iter().map(|s| s.2).sum();
        let mut at = rng.random_range(0.0..total);
        for &(w, h, weight) in &self.sizes {
            if at < weight {
                return (w, h);
            }
            at -= weight;
        }
        let last = self.sizes[self.sizes.len() - 1];
        (last.0, last.1)
    }

    /// The most pixels one image can have (means plus three standard deviations).
    fn most_pixels(&self) -> f64 {
        let hi = |(m, s): (f64, f64)| (m + 3.0 * s).min(f64::from(MAX_SIDE));
        match self
            .sizes
            .iter()
            .map(|s| f64::from(s.0) * f64::from(s.1))
            .reduce(f64::max)
        {
            Some(p) => p,
            None => hi(self.width) * hi(self.height),
        }
    }
}

/// Audio clips in every request (WAV, integer samples).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AudioSpec {
    /// Length in seconds: mean, standard deviation.
    pub seconds: (f64, f64),
    /// Sample rates to draw from (Hz).
    pub sample_rates: Vec<u32>,
    /// Bits per sample to draw from (8, 16, 24 or 32).
    pub depths: Vec<u16>,
    /// Channels.
    pub channels: u16,
    /// Clips per request.
    pub per_request: u32,
}

/// What every synthetic chat request carries besides its text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MediaSpec {
    /// Images, if any.
    pub images: Option<ImageSpec>,
    /// Audio, if any.
    pub audio: Option<AudioSpec>,
}

impl MediaSpec {
    /// Whether requests carry anything but text.
    pub fn any(&self) -> bool {
        self.images.is_some() || self.audio.is_some()
    }

    /// The media bytes `entries` requests would take, from the means plus three standard
    /// deviations (before base64), against [`MAX_BYTES`].
    pub fn check_budget(&self, entries: u64) -> Result<(), MediaBudget> {
        let hi = |(m, s): (f64, f64)| m + 3.0 * s;
        let mut bytes = 0.0;
        if let Some(i) = &self.images {
            bytes += f64::from(i.per_request.1) * i.most_pixels() * 3.0;
        }
        if let Some(a) = &self.audio {
            let rate = a.sample_rates.iter().copied().max().unwrap_or(0);
            let depth = a.depths.iter().copied().max().unwrap_or(0);
            bytes += f64::from(a.per_request)
                * hi(a.seconds).min(MAX_SECONDS)
                * f64::from(rate)
                * f64::from(depth / 8)
                * f64::from(a.channels);
        }
        if bytes * entries as f64 > MAX_BYTES {
            return Err(MediaBudget {
                entries,
                each: bytes,
            });
        }
        Ok(())
    }
}

/// One image or clip to make: what was drawn for it.
#[derive(Debug, Clone, PartialEq)]
pub enum Draw {
    /// An image of this size and encoding (never `Random`).
    Image {
        /// Pixels across.
        width: u32,
        /// Pixels down.
        height: u32,
        /// PNG or JPEG.
        format: ImageFormat,
        /// The seed of its pixels.
        seed: u64,
    },
    /// A clip.
    Audio {
        /// Samples per channel.
        frames: u32,
        /// Samples a second.
        rate: u32,
        /// Bits per sample.
        depth: u16,
        /// Channels.
        channels: u16,
        /// The seed of its samples.
        seed: u64,
    },
}

fn normal(rng: &mut impl Rng, (mean, std): (f64, f64)) -> f64 {
    if std <= 0.0 {
        return mean;
    }
    use rand_distr::Distribution;
    rand_distr::Normal::new(mean, std)
        .expect("finite")
        .sample(rng)
}

impl MediaSpec {
    /// What one request carries, drawn from `rng`.
    pub fn draw(&self, rng: &mut impl Rng) -> Vec<Draw> {
        let mut out = Vec::new();
        if let Some(i) = &self.images {
            let (few, most) = i.per_request;
            let n = if few < most {
                rng.random_range(few..=most)
            } else {
                few
            };
            for _ in 0..n {
                let (width, height) = i.size(rng);
                let format = match i.format {
                    ImageFormat::Random if rng.random_bool(0.5) => ImageFormat::Jpeg,
                    ImageFormat::Random => ImageFormat::Png,
                    f => f,
                };
                out.push(Draw::Image {
                    width,
                    height,
                    format,
                    seed: rng.next_u64(),
                });
            }
        }
        if let Some(a) = &self.audio {
            for _ in 0..a.per_request {
                let secs = normal(rng, a.seconds).clamp(0.01, MAX_SECONDS);
                let rate = a.sample_rates[rng.random_range(0..a.sample_rates.len())];
                let depth = a.depths[rng.random_range(0..a.depths.len())];
                out.push(Draw::Audio {
                    frames: (secs * f64::from(rate)).round().max(1.0) as u32,
                    rate,
                    depth,
                    channels: a.channels,
                    seed: rng.next_u64(),
                });
            }
        }
        out
    }
}

impl Draw {
    /// The chat content part that carries it.
    pub fn part(&self) -> Result<Value, WorkloadError> {
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        Ok(match *self {
            Draw::Image {
                width,
                height,
                format,
                seed,
            } => {
                let mut pixels = vec![0u8; width as usize * height as usize * 3];
                ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut pixels);
                let mut bytes = Vec::new();
                let mime = match format {
                    ImageFormat::Jpeg => {
                        jpeg_encoder::Encoder::new(&mut bytes, 75)
                            .encode(
                                &pixels,
                                width as u16,
                                height as u16,
                                jpeg_encoder::ColorType::Rgb,
                            )
                            .map_err(|source| MediaError::Jpeg {
                                width,
                                height,
                                source,
                            })?;
                        "jpeg"
                    }
                    _ => {
                        let mut e = png::Encoder::new(&mut bytes, width, height);
                        e.set_color(png::ColorType::Rgb);
                        e.set_depth(png::BitDepth::Eight);
                        e.write_header()
                            .and_then(|mut w| w.write_image_data(&pixels))
                            .map_err(|source| MediaError::Png {
                                width,
                                height,
                                source,
                            })?;
                        "png"
                    }
                };
                json!({"type": "image_url", "image_url": {"url": format!("data:image/{mime};base64,{}", b64(&bytes))}})
            }
            Draw::Audio {
                frames,
                rate,
                depth,
                channels,
                seed,
            } => {
                let spec = hound::WavSpec {
                    channels,
                    sample_rate: rate,
                    bits_per_sample: depth,
                    sample_format: hound::SampleFormat::Int,
                };
                let mut cursor = std::io::Cursor::new(Vec::new());
                let wav = MediaError::Wav;
                let mut w = hound::WavWriter::new(&mut cursor, spec).map_err(wav)?;
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                // Quiet noise: a sixteenth of full scale.
                let peak = 1i64 << (depth - 5);
                for _ in 0..u64::from(frames) * u64::from(channels) {
                    let v = rng.random_range(-peak..peak);
                    match depth {
                        8 => w.write_sample(v as i8),
                        16 => w.write_sample(v as i16),
                        _ => w.write_sample(v as i32),
                    }
                    .map_err(wav)?;
                }
                w.finalize().map_err(wav)?;
                json!({"type": "input_audio", "input_audio": {"data": b64(cursor.get_ref()), "format": "wav"}})
            }
        })
    }
}

/// A user message of `text` followed by `parts`.
pub fn message(text: &str, parts: Vec<Value>) -> Value {
    let mut content = vec![json!({"type": "text", "text": text})];
    content.extend(parts);
    json!({"role": "user", "content": content})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_url(part: &Value) -> (String, Vec<u8>) {
        let url = part["image_url"]["url"].as_str().unwrap();
        let (head, data) = url.split_once(";base64,").unwrap();
        (
            head.to_string(),
            base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap(),
        )
    }

    #[test]
    fn images_decode_to_the_size_drawn_in_their_format() {
        for (format, mime) in [
            (ImageFormat::Png, "data:image/png"),
            (ImageFormat::Jpeg, "data:image/jpeg"),
        ] {
            let d = Draw::Image {
                width: 37,
                height: 21,
                format,
                seed: 7,
            };
            let (head, bytes) = decode_url(&d.part().unwrap());
            assert_eq!(head, mime);
            match format {
                ImageFormat::Png => {
                    let r = png::Decoder::new(std::io::Cursor::new(&bytes))
                        .read_info()
                        .unwrap();
                    assert_eq!((r.info().width, r.info().height), (37, 21));
                }
                _ => {
                    // SOF0: FF C0, length, precision, then height and width.
                    let at = bytes.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
                    let be = |i: usize| u16::from_be_bytes([bytes[i], bytes[i + 1]]);
                    assert_eq!((be(at + 7), be(at + 5)), (37, 21));
                }
            }
        }
    }

    #[test]
    fn audio_is_a_wav_of_the_length_rate_and_depth_drawn() {
        let d = Draw::Audio {
            frames: 8000,
            rate: 16000,
            depth: 24,
            channels: 2,
            seed: 1,
        };
        let part = d.part().unwrap();
        assert_eq!(part["input_audio"]["format"], "wav");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(part["input_audio"]["data"].as_str().unwrap())
            .unwrap();
        let r = hound::WavReader::new(std::io::Cursor::new(bytes)).unwrap();
        let s = r.spec();
        assert_eq!(
            (s.sample_rate, s.bits_per_sample, s.channels),
            (16000, 24, 2)
        );
        assert_eq!(r.duration(), 8000);
    }

    #[test]
    fn draws_follow_the_seed_and_the_spec() {
        let spec = MediaSpec {
            images: Some(ImageSpec {
                width: (100.0, 0.0),
                height: (50.0, 10.0),
                sizes: Vec::new(),
                format: ImageFormat::Random,
                per_request: (2, 2),
            }),
            audio: Some(AudioSpec {
                seconds: (1.5, 0.0),
                sample_rates: vec![8000, 44100],
                depths: vec![16],
                channels: 1,
                per_request: 1,
            }),
        };
        let draws = |seed| spec.draw(&mut ChaCha8Rng::seed_from_u64(seed));
        assert_eq!(draws(3), draws(3));
        let all: Vec<Draw> = (0..200).flat_map(draws).collect();
        let images: Vec<_> = all
            .iter()
            .filter_map(|d| match d {
                Draw::Image { width, format, .. } => Some((*width, *format)),
                _ => None,
            })
            .collect();
        assert_eq!(images.len(), 400);
        assert!(images.iter().all(|(w, _)| *w == 100));
        let jpegs = images
            .iter()
            .filter(|(_, f)| *f == ImageFormat::Jpeg)
            .count();
        assert!((150..250).contains(&jpegs), "{jpegs} of 400 drawn JPEG");
        for d in &all {
            if let Draw::Audio { frames, rate, .. } = d {
                assert_eq!(*frames as f64, (1.5 * f64::from(*rate)).round());
            }
        }
        assert!(spec.check_budget(100).is_ok());
        assert!(spec.check_budget(100_000_000).is_err());
    }

    #[test]
    fn sizes_by_weight_and_counts_in_a_range() {
        let spec = MediaSpec {
            images: Some(ImageSpec {
                width: (0.0, 0.0),
                height: (0.0, 0.0),
                sizes: vec![(256, 256, 0.25), (1280, 720, 0.75)],
                format: ImageFormat::Jpeg,
                per_request: (0, 3),
            }),
            audio: None,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let (mut counts, mut small, mut large) = ([0u32; 4], 0, 0);
        for _ in 0..4000 {
            let draws = spec.draw(&mut rng);
            counts[draws.len()] += 1;
            for d in draws {
                match d {
                    Draw::Image {
                        width: 256,
                        height: 256,
                        ..
                    } => small += 1,
                    Draw::Image {
                        width: 1280,
                        height: 720,
                        ..
                    } => large += 1,
                    other => panic!("{other:?}"),
                }
            }
        }
        assert!(counts.iter().all(|c| (900..1100).contains(c)), "{counts:?}");
        let share = f64::from(large) / f64::from(small + large);
        assert!((0.72..0.78).contains(&share), "{share}");
        // The budget takes the largest size and the most images.
        let per = 3.0 * 1280.0 * 720.0 * 3.0;
        let fits = (MAX_BYTES / per) as u64;
        assert!(spec.check_budget(fits).is_ok() && spec.check_budget(fits + 1).is_err());
    }
}
