//! A short pass of every fuzz target on stable, as CI runs it: the real captures and a few
//! hundred thousand mutations of them (seeded, so a failure repeats). The coverage-guided runs are
//! `cargo +nightly fuzz run --fuzz-dir tests/fuzz TARGET` (see docs/performance.md, "Fuzzing").

#[path = "../fuzz/bodies.rs"]
mod bodies;

/// Fragments that matter to the parsers and to the secrets rule, spliced into the mutations.
const TOKENS: [&[u8]; 14] = [
    bodies::SECRETS[0].as_bytes(),
    bodies::SECRETS[1].as_bytes(),
    b"\r\n",
    b"\n\n",
    b"\r",
    b"data: ",
    b"event:",
    b":",
    b"0\r\n\r\n",
    b"\xEF\xBB\xBF",
    b"[DONE]",
    b"{\"choices\":[{\"delta\":{\"content\":\"x\"}}]}",
    b"HTTP/1.1 200 OK\r\n",
    b"Transfer-Encoding: chunked\r\n",
];

/// The captures whole, their bodies alone, and pairs of their events' documents (one
/// learned, the next read: the shape the differential target needs).
fn seeds() -> Vec<Vec<u8>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/captures");
    let mut out = Vec::new();
    let mut files = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        if dir.is_dir() {
            files.extend(std::fs::read_dir(dir).unwrap().map(|f| f.unwrap().path()));
        }
    }
    files.sort();
    for f in files {
        let bytes = std::fs::read(f).unwrap();
        if let Some(i) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            out.push(bytes[i + 4..].to_vec());
        }
        let events: Vec<&[u8]> = bytes
            .split(|&b| b == b'\n')
            .filter_map(|l| l.strip_prefix(b"data: "))
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
            .filter(|l| l.starts_with(b"{"))
            .collect();
        for pair in events.windows(2).step_by(16).take(2) {
            out.push([pair[0], b"\n", pair[1]].concat());
        }
        out.push(bytes);
    }
    out
}

/// xorshift64*: small, seeded, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
    }
}

fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut m = seed[..seed.len().min(8192)].to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(m.len() + 1);
        match rng.below(5) {
            0 if !m.is_empty() => {
                let i = at.min(m.len() - 1);
                m[i] ^= 1 << rng.below(8);
            }
            1 => m.insert(at, rng.below(256) as u8),
            2 => m.truncate(at),
            3 => {
                let end = (at + rng.below(64)).min(m.len());
                m.drain(at..end);
            }
            _ => {
                let t = TOKENS[rng.below(TOKENS.len())];
                m.splice(at..at, t.iter().copied());
            }
        }
    }
    m
}

/// The seeds whole, then 1,000 seeded mutations of each, through `target`.
fn survives(name: &str, target: fn(&[u8]), seed: u64) {
    let seeds = seeds();
    assert!(seeds.len() >= 10, "only {} seeds", seeds.len());
    let mut rng = Rng(seed);
    let mut runs = 0;
    for seed in &seeds {
        target(seed);
        for _ in 0..1000 {
            let input = mutate(seed, &mut rng);
            let outcome = std::panic::catch_unwind(|| target(&input));
            assert!(
                outcome.is_ok(),
                "{name} failed on {:?}",
                String::from_utf8_lossy(&input)
            );
            runs += 1;
        }
    }
    eprintln!("fuzz smoke, {name}: {runs} inputs");
}

/// A test per target (the longest, redact, about 5.6 s here), so that a failure names its target
/// and the short tests run beside the others instead of one long one.
macro_rules! targets {
    ($($target:ident: $seed:literal),* $(,)?) => {$(
        mod $target {
            use crate::support;

            #[test]
            fn survives_the_captures_and_their_mutations() {
                let _shared = support::shared();
                super::survives(stringify!($target), super::bodies::$target, $seed);
            }
        }
    )*};
}

targets! {
    chunked: 0x5eed_1234_abcd_0001,
    head: 0x5eed_1234_abcd_0002,
    sse: 0x5eed_1234_abcd_0003,
    openai: 0x5eed_1234_abcd_0004,
    sse_differential: 0x5eed_1234_abcd_0005,
    openai_differential: 0x5eed_1234_abcd_0006,
    redact: 0x5eed_1234_abcd_0007,
}
