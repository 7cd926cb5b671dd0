//! Charts as SVG text: lines and points on linear or base-2 logarithmic axes, a legend whose
//! entries hide and show their series (with [`SCRIPT`]), points that say their values when
//! hovered, intervals as error bars, and marked x (the knee, a search's result). Small and
//! self-contained, so that a report inlines them with no font or network resource; every
//! figure a chart draws is in the artifacts beside it.

use std::fmt::Write;

/// One line (or set of points) of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// (x, y) in data units; non-finite values are skipped.
    pub points: Vec<(f64, f64)>,
    /// How the points are drawn.
    pub style: Style,
    /// Intervals drawn as error bars: (x, low, high).
    pub bars: Vec<(f64, f64, f64)>,
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Points only.
    Points,
    /// The points joined by a line (and marked, when there are few).
    Line,
    /// A wide pale band under the other series, without points (a front that runs through
    /// other series' points).
    Band,
    /// The points taken in pairs, each pair a line of its own (a timeline's bars).
    Segments,
}

/// A chart.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    /// Title, above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// The data.
    pub series: Vec<Series>,
    /// A base-2 logarithmic x axis (for concurrency sweeps).
    pub log_x: bool,
    /// Vertical marks (the knee, a search's result), each at an x with its label.
    pub marks: Vec<(f64, String)>,
    /// The x axis zooms (a linear time axis): drag across the plot to zoom in, double-click
    /// to see it whole again (with the page's [`SCRIPT`]).
    pub zoom: bool,
    /// The x range the axis spans at least, beyond the points (a run's whole measured phase,
    /// where the points stop with the last answer).
    pub x_span: Option<(f64, f64)>,
}

const W: f64 = 720.0;
const H: f64 = 380.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 52.0;
/// The height of a row of the legend.
const LEGEND_ROW: f64 = 16.0;
const BOTTOM: f64 = 56.0;
/// Colour-blind-safe (Okabe–Ito).
const COLOURS: &[&str] = &[
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

/// `s` with the five XML special characters escaped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Round tick positions (1, 2 or 5 × 10^k apart) covering `lo..hi`.
fn nice_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| span / s <= 6.0)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    (0..=12)
        .map(|i| first + i as f64 * step)
        .take_while(|t| *t <= hi + step * 1e-9)
        .collect()
}

/// A tick's text: no more digits than it needs.
fn tick_text(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        let t = format!("{v:.3}");
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The ticks' texts: each as [`tick_text`] writes it, or, where that writes two alike (ticks
/// 100.1 and 100.2 both as "100"), all with as many decimals as the ticks' step needs.
fn tick_texts(ticks: &[f64]) -> Vec<String> {
    let plain: Vec<String> = ticks.iter().copied().map(tick_text).collect();
    if plain.windows(2).all(|w| w[0] != w[1]) {
        return plain;
    }
    let step = ticks
        .windows(2)
        .map(|w| (w[1] - w[0]).abs())
        .filter(|d| *d > 0.0)
        .fold(f64::INFINITY, f64::min);
    let digits = if step.is_finite() {
        // (A step of 0.1 is 0.09999… in floating point: no second decimal for it.)
        (-step.log10() - 1e-6).ceil().clamp(0.0, 9.0) as usize
    } else {
        0
    };
    ticks.iter().map(|v| format!("{v:.digits$}")).collect()
}

/// A value as a hovered point shows it: 4 significant digits at most, no trailing zeros.
fn value_text(v: f64) -> String {
    let digits = if v == 0.0 {
        0
    } else {
        (3 - v.abs().log10().floor() as i32).clamp(0, 6) as usize
    };
    let t = format!("{v:.digits$}");
    if t.contains('.') {
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        t
    }
}

/// The script a page with charts carries (inline; it loads nothing): clicking a legend entry
/// hides or shows its series; on a zooming chart, dragging across the plot shows that x range
/// (the view narrowed, the points kept round, the x ticks redrawn), and a double-click shows
/// it whole again.
pub const SCRIPT: &str = r##"(function(){
function chart(e){return e.target.closest&&e.target.closest('svg.plot')}
document.addEventListener('click',function(e){
var l=e.target.closest&&e.target.closest('g.legend');if(!l)return;
var svg=l.closest('svg'),gs=svg.querySelectorAll('g.series[data-series="'+l.dataset.series+'"]');
var hide=!l.classList.contains('off');l.classList.toggle('off',hide);
l.setAttribute('opacity',hide?'0.35':'1');
gs.forEach(function(g){g.style.display=hide?'none':''});});
function span(p){return [+(p.dataset.lo||p.dataset.x0),+(p.dataset.hi||p.dataset.x1)]}
function at(p,clientX){var r=p.getBoundingClientRect(),s=span(p);
return s[0]+(clientX-r.left)/r.width*(s[1]-s[0])}
function zoom(p,lo,hi){
var x0=+p.dataset.x0,x1=+p.dataset.x1,L=+p.dataset.left,W=+p.dataset.pw,T=+p.dataset.top,H=+p.dataset.ph;
var g=p.parentNode.querySelector('g.xticks');if(p.orig===undefined)p.orig=g.innerHTML;
var a=L+(lo-x0)/(x1-x0)*W,b=L+(hi-x0)/(x1-x0)*W,k=W/(b-a);
p.setAttribute('viewBox',a+' '+T+' '+(b-a)+' '+H);p.dataset.lo=lo;p.dataset.hi=hi;
p.querySelectorAll('circle').forEach(function(c){var cx=c.getAttribute('cx');
c.setAttribute('transform','translate('+cx+' 0) scale('+(1/k)+' 1) translate('+(-cx)+' 0)')});
if(lo==x0&&hi==x1){g.innerHTML=p.orig;return}
var sp=hi-lo,mag=Math.pow(10,Math.floor(Math.log10(sp/5))),step=10*mag;
[1,2,5,10].some(function(m){if(sp/(m*mag)<=6){step=m*mag;return true}return false});
var d=Math.max(0,Math.ceil(-Math.log10(step)-1e-6)),h='';
for(var t=Math.ceil(lo/step)*step;t<=hi+step*1e-9;t+=step){var x=(L+(t-lo)/sp*W).toFixed(1);
h+='<line x1="'+x+'" x2="'+x+'" y1="'+T+'" y2="'+(T+H)+'" stroke="#f0f0f0"/><text x="'+x+'" y="'+(T+H+16)+'" text-anchor="middle">'+t.toFixed(d)+'</text>'}
g.innerHTML=h}
var from=null;
document.addEventListener('mousedown',function(e){var p=chart(e);if(p){from={p:p,x:e.clientX};e.preventDefault()}});
document.addEventListener('mouseup',function(e){if(!from)return;var f=from;from=null;
if(Math.abs(e.clientX-f.x)<4)return;var a=at(f.p,f.x),b=at(f.p,e.clientX);
zoom(f.p,Math.min(a,b),Math.max(a,b))});
document.addEventListener('dblclick',function(e){var p=chart(e);if(p)zoom(p,+p.dataset.x0,+p.dataset.x1)});
})();"##;

impl Chart {
    /// The chart as an SVG element to put inside HTML (which needs no namespace).
    pub fn inline_svg(&self) -> String {
        self.svg()
            .replacen(r#" xmlns="http://www.w3.org/2000/svg""#, "", 1)
    }

    /// The chart as a standalone SVG document's element.
    pub fn svg(&self) -> String {
        // The axes hold every point and every error bar's ends.
        let pts: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| {
                let bars = s.bars.iter().flat_map(|&(x, lo, hi)| [(x, lo), (x, hi)]);
                s.points.iter().copied().chain(bars)
            })
            .filter(|(x, y)| x.is_finite() && y.is_finite() && (!self.log_x || *x > 0.0))
            .collect();
        let mut out = String::new();
        let _ = write!(
            out,
            r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" font-family="sans-serif" font-size="12"><title>{t}</title><rect width="{W}" height="{H}" fill="white"/><text x="{cx}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{t}</text>"##,
            t = escape(&self.title),
            cx = W / 2.0
        );
        // The legend, in rows above the plot where no data can hide it: as many rows as its
        // entries need, the plot below them.
        let mut legend = Vec::with_capacity(self.series.len());
        let (mut lx, mut row) = (LEFT, 0.0);
        for s in &self.series {
            let width = 28.0 + 6.5 * s.name.chars().count() as f64;
            if lx > LEFT && lx + width > W - RIGHT {
                (lx, row) = (LEFT, row + 1.0);
            }
            legend.push((lx, TOP - 10.0 + row * LEGEND_ROW));
            lx += width;
        }
        let top = TOP + row * LEGEND_ROW;
        let (pw, ph) = (W - LEFT - RIGHT, H - top - BOTTOM);
        if pts.is_empty() {
            let _ = write!(
                out,
                r##"<text x="{}" y="{}" text-anchor="middle" fill="#666">no data</text></svg>"##,
                W / 2.0,
                H / 2.0
            );
            return out;
        }
        let fx = |x: f64| if self.log_x { x.log2() } else { x };
        let (mut x0, mut x1) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| {
            (a.min(fx(p.0)), b.max(fx(p.0)))
        });
        if let Some((a, b)) = self.x_span.filter(|_| !self.log_x) {
            (x0, x1) = (x0.min(a), x1.max(b));
        }
        let mut y1 = pts.iter().fold(f64::MIN, |a, p| a.max(p.1));
        let mut y0 = pts.iter().fold(f64::MAX, |a, p| a.min(p.1)).min(0.0);
        if x1 - x0 < 1e-12 {
            (x0, x1) = (x0 - 1.0, x1 + 1.0);
        }
        if y1 - y0 < 1e-12 {
            y1 = y0 + 1.0;
        }
        y1 += (y1 - y0) * 0.05;
        if !self.log_x {
            let pad = (x1 - x0) * 0.02;
            (x0, x1) = (x0 - pad, x1 + pad);
        } else {
            (x0, x1) = (x0 - 0.2, x1 + 0.2);
        }
        y0 = y0.min(0.0);
        let px = |x: f64| LEFT + (fx(x) - x0) / (x1 - x0) * pw;
        let py = |y: f64| top + ph - (y - y0) / (y1 - y0) * ph;
        // Grid and ticks.
        let yt = nice_ticks(y0, y1);
        for (t, text) in yt.iter().zip(tick_texts(&yt)) {
            let y = py(*t);
            let _ = write!(
                out,
                r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + pw,
                LEFT - 6.0,
                y + 4.0,
                text
            );
        }
        let xt: Vec<f64> = if self.log_x {
            let (a, b) = (x0.ceil() as i32, x1.floor() as i32);
            let every = ((b - a) / 10 + 1).max(1);
            (a..=b)
                .filter(|e| (e - a) % every == 0)
                .map(|e| 2f64.powi(e))
                .collect()
        } else {
            nice_ticks(x0, x1)
        };
        let zoom = self.zoom && !self.log_x;
        out.push_str(r#"<g class="xticks">"#);
        for (t, text) in xt.iter().zip(tick_texts(&xt)) {
            let x = px(*t);
            let _ = write!(
                out,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{top}" y2="{}" stroke="#f0f0f0"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
                top + ph,
                top + ph + 16.0,
                text
            );
        }
        out.push_str("</g>");
        let _ = write!(
            out,
            r##"<rect x="{LEFT}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/><text x="{}" y="{}" text-anchor="middle">{}</text><text transform="translate(16 {}) rotate(-90)" text-anchor="middle">{}</text>"##,
            LEFT + pw / 2.0,
            H - 14.0,
            escape(&self.x_label),
            top + ph / 2.0,
            escape(&self.y_label)
        );
        for (k, (x, label)) in self.marks.iter().enumerate() {
            if x.is_finite() && (!self.log_x || *x > 0.0) {
                let x = px(*x);
                // Labels stack upwards, so that two marks at one x stay readable.
                let _ = write!(
                    out,
                    r##"<line x1="{x:.1}" x2="{x:.1}" y1="{top}" y2="{}" stroke="#B00020" stroke-dasharray="5 4" stroke-width="1.5"/><text x="{:.1}" y="{}" fill="#B00020">{}</text>"##,
                    top + ph,
                    x + 4.0,
                    top + ph - 8.0 - 14.0 * k as f64,
                    escape(label)
                );
            }
        }
        // A zooming chart draws its series in a plot of their own, whose view the script
        // narrows to the x range dragged across (the same coordinates, so nothing else moves).
        if zoom {
            let _ = write!(
                out,
                r#"<svg class="plot" x="{LEFT}" y="{top}" width="{pw}" height="{ph}" viewBox="{LEFT} {top} {pw} {ph}" preserveAspectRatio="none" cursor="crosshair" data-x0="{x0}" data-x1="{x1}" data-left="{LEFT}" data-pw="{pw}" data-top="{top}" data-ph="{ph}"><rect x="{LEFT}" y="{top}" width="{pw}" height="{ph}" fill="none" pointer-events="all"/>"#
            );
        }
        let mut legend_out = String::new();
        let (under, over): (Vec<_>, Vec<_>) = self
            .series
            .iter()
            .enumerate()
            .partition(|(_, s)| s.style == Style::Band);
        for (i, s) in under.into_iter().chain(over) {
            let colour = COLOURS[i % COLOURS.len()];
            // A series is one group, which the page's script hides or shows when its legend
            // entry is clicked.
            let _ = write!(out, r#"<g class="series" data-series="{i}">"#);
            let drawable =
                |(x, y): &(f64, f64)| x.is_finite() && y.is_finite() && (!self.log_x || *x > 0.0);
            let ok: Vec<(f64, f64)> = s.points.iter().copied().filter(drawable).collect();
            if s.style == Style::Segments {
                // One path for all; the thicker the fewer, as rows of a timeline.
                // A pair with a point that cannot be drawn is left out whole.
                let pairs: Vec<&[(f64, f64)]> = s
                    .points
                    .chunks_exact(2)
                    .filter(|p| p.iter().all(drawable))
                    .collect();
                let width = (ph / pairs.len().max(1) as f64 * 0.8).clamp(0.5, 4.0);
                let mut d = String::new();
                for pair in pairs {
                    let _ = write!(
                        d,
                        "M{:.1} {:.1}L{:.1} {:.1}",
                        px(pair[0].0),
                        py(pair[0].1),
                        px(pair[1].0),
                        py(pair[1].1)
                    );
                }
                let _ = write!(
                    out,
                    r##"<path d="{d}" stroke="{colour}" stroke-width="{width:.2}" fill="none" vector-effect="non-scaling-stroke"/>"##
                );
            } else if matches!(s.style, Style::Line | Style::Band) && ok.len() > 1 {
                let path: Vec<String> = ok
                    .iter()
                    .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
                    .collect();
                let style = if s.style == Style::Band {
                    r#"stroke-width="10" stroke-opacity="0.3" stroke-linejoin="round" stroke-linecap="round""#
                } else {
                    r#"stroke-width="2""#
                };
                let _ = write!(
                    out,
                    r##"<polyline fill="none" stroke="{colour}" {style} vector-effect="non-scaling-stroke" points="{}"/>"##,
                    path.join(" ")
                );
            }
            for &(x, lo, hi) in &s.bars {
                if [x, lo, hi].iter().all(|v| v.is_finite()) && (!self.log_x || x > 0.0) {
                    let (x, lo, hi) = (px(x), py(lo), py(hi));
                    let _ = write!(
                        out,
                        r##"<path d="M{x:.1} {lo:.1}V{hi:.1}M{:.1} {lo:.1}h8M{:.1} {hi:.1}h8" stroke="{colour}" stroke-width="1.2" fill="none"/>"##,
                        x - 4.0,
                        x - 4.0
                    );
                }
            }
            if s.style == Style::Points || (s.style == Style::Line && ok.len() <= 40) {
                // Each point says its values when hovered.
                for (x, y) in &ok {
                    let _ = write!(
                        out,
                        r##"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"><title>{}: {} {}, {} {}</title></circle>"##,
                        px(*x),
                        py(*y),
                        escape(&s.name),
                        escape(&self.x_label),
                        value_text(*x),
                        escape(&self.y_label),
                        value_text(*y)
                    );
                }
            }
            out.push_str("</g>");
            let (lx, ly) = legend[i];
            let _ = write!(
                legend_out,
                r##"<g class="legend" data-series="{i}" cursor="pointer"><title>click to hide or show {name}</title><rect x="{lx}" y="{:.1}" width="12" height="4" fill="{colour}"/><text x="{}" y="{ly:.1}">{name}</text></g>"##,
                ly - 5.0,
                lx + 16.0,
                name = escape(&s.name)
            );
        }
        if zoom {
            out.push_str("</svg>");
        }
        out.push_str(&legend_out);
        out.push_str("</svg>");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(log_x: bool) -> Chart {
        Chart {
            title: "TTFT <p99> & p50".into(),
            x_label: "concurrency".into(),
            y_label: "ms".into(),
            series: vec![
                Series {
                    name: "p50".into(),
                    points: vec![(1.0, 10.0), (4.0, 12.0), (16.0, 30.0), (64.0, f64::NAN)],
                    style: Style::Line,
                    bars: Vec::new(),
                },
                Series {
                    name: "p99".into(),
                    points: vec![(1.0, 11.0), (4.0, 15.0), (16.0, 80.0)],
                    style: Style::Points,
                    bars: Vec::new(),
                },
            ],
            log_x,
            marks: vec![(4.0, "knee".into())],
            zoom: false,
            x_span: None,
        }
    }

    #[test]
    fn error_bars_are_drawn_and_widen_the_axis_to_their_ends() {
        let mut c = chart(false);
        c.marks.push((16.0, "highest within the SLO".into()));
        let plain = c.svg();
        c.series[0].bars = vec![(1.0, 9.0, 11.0), (16.0, 25.0, 200.0), (4.0, f64::NAN, 1.0)];
        let svg = c.svg();
        // Two finite bars; the upper end 200 raises the y axis past the points' 80.
        assert_eq!(svg.matches("<path d=\"M").count(), 2);
        assert!(
            !plain.contains(">200</text>") && svg.contains(">200</text>"),
            "{svg}"
        );
        // Both marks, their labels one above the other.
        assert!(svg.contains(">knee</text>") && svg.contains(">highest within the SLO</text>"));
    }

    #[test]
    fn a_zooming_chart_draws_its_series_in_a_plot_of_their_own_and_its_legend_outside() {
        let mut c = chart(false);
        assert!(!c.svg().contains("class=\"plot\""));
        c.zoom = true;
        let svg = c.svg();
        let plot = svg.find("<svg class=\"plot\"").expect("a nested plot");
        let end = plot + svg[plot..].find("</svg>").unwrap();
        // Both series inside the plot, the legend after it (a plot clips what lies outside).
        assert_eq!(svg[plot..end].matches("<g class=\"series\"").count(), 2);
        assert!(svg[end..].contains("<g class=\"legend\""));
        assert!(svg[plot..].contains("data-x0=\"") && svg.contains("<g class=\"xticks\">"));
        // A base-2 axis does not zoom.
        c.log_x = true;
        assert!(!c.svg().contains("class=\"plot\""));
    }

    #[test]
    fn a_band_is_drawn_first_wide_and_without_points() {
        let mut c = chart(false);
        c.series.push(Series {
            name: "front".into(),
            points: vec![(1.0, 10.0), (16.0, 30.0)],
            style: Style::Band,
            bars: Vec::new(),
        });
        let svg = c.svg();
        // Still 6 circles (the band adds none); its line comes before the p50 line.
        assert_eq!(svg.matches("<circle").count(), 6);
        let lines: Vec<_> = svg.match_indices("<polyline").map(|(i, _)| i).collect();
        assert_eq!(lines.len(), 2);
        assert!(svg[lines[0]..].starts_with(&format!(
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"10\"",
            COLOURS[2]
        )));
    }

    #[test]
    fn a_chart_is_one_svg_element_with_its_text_escaped_and_every_point_drawn() {
        let svg = chart(true).svg();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<svg").count(), 1);
        assert!(chart(true).inline_svg().starts_with("<svg viewBox="));
        assert!(svg.contains("TTFT &lt;p99&gt; &amp; p50"));
        assert!(!svg.contains("<p99>"));
        // 3 finite p50 points joined and marked, 3 p99 points: 6 circles, one line.
        assert_eq!(svg.matches("<circle").count(), 6);
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains(">knee</text>"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        // Each series is a group its legend entry names, and a point says its values.
        assert_eq!(svg.matches("<g class=\"series\"").count(), 2);
        assert!(svg.contains("<g class=\"legend\" data-series=\"1\""));
        assert!(
            svg.contains("<title>p50: concurrency 4, ms 12</title>"),
            "{svg}"
        );
        // The base-2 axis ticks at the powers of two between the points.
        for t in [
            ">1</text>",
            ">2</text>",
            ">4</text>",
            ">8</text>",
            ">16</text>",
        ] {
            assert!(svg.contains(t), "{t}");
        }
        // Points go left to right as x grows, and up as y grows.
        let xs: Vec<f64> = svg
            .match_indices("<circle cx=\"")
            .map(|(i, m)| {
                let rest = &svg[i + m.len()..];
                rest[..rest.find('"').unwrap()].parse().unwrap()
            })
            .collect();
        assert!(xs[0] < xs[1] && xs[1] < xs[2], "{xs:?}");
    }

    #[test]
    fn empty_and_flat_data_still_draw() {
        let mut c = chart(false);
        c.series.iter_mut().for_each(|s| s.points.clear());
        assert!(c.svg().contains("no data"));
        c.series[0].points = vec![(5.0, 7.0)];
        let svg = c.svg();
        assert_eq!(svg.matches("<circle").count(), 1);
        assert!(!svg.contains("NaN"));
    }

    #[test]
    fn the_x_axis_spans_the_range_asked_beyond_the_points() {
        let mut c = chart(false);
        c.series.truncate(1);
        c.series[0].points = vec![(0.5, 7.0), (1.0, 8.0)];
        let ticks = |svg: &str| -> Vec<String> {
            let xt = &svg[svg.find("class=\"xticks\"").unwrap()..];
            let xt = &xt[..xt.find("</g>").unwrap()];
            xt.split("text-anchor=\"middle\">")
                .skip(1)
                .map(|t| t[..t.find('<').unwrap()].to_string())
                .collect()
        };
        assert!(!ticks(&c.svg()).contains(&"8".to_string()));
        // A run of 8 s whose answers stopped after 1 s: the axis runs to 8.
        c.x_span = Some((0.0, 8.0));
        assert!(
            ticks(&c.svg()).contains(&"8".to_string()),
            "{:?}",
            ticks(&c.svg())
        );
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(nice_ticks(0.0, 10.0), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t: Vec<String> = nice_ticks(0.0, 1.0).into_iter().map(tick_text).collect();
        assert_eq!(t, ["0", "0.2", "0.4", "0.6", "0.8", "1"]);
        assert_eq!(nice_ticks(13.0, 97.0), [20.0, 40.0, 60.0, 80.0]);
        assert_eq!(tick_text(25_000.0), "25k");
        assert_eq!(tick_text(2.5), "2.5");
        assert_eq!(tick_text(0.05), "0.05");
        // Ticks that the plain text would write alike get the decimals their step needs.
        let t = tick_texts(&nice_ticks(100.1, 100.5));
        assert_eq!(t, ["100.1", "100.2", "100.3", "100.4", "100.5"]);
        assert_eq!(tick_texts(&[25_000.0, 25_100.0]), ["25000", "25100"]);
        assert_eq!(tick_texts(&[1.0, 2.0]), ["1", "2"]);
        // A hovered point: 4 significant digits at most.
        assert_eq!(value_text(1234.5678), "1235");
        assert_eq!(value_text(0.012345), "0.01235");
        assert_eq!(value_text(2.5), "2.5");
        assert_eq!(value_text(0.0), "0");
    }

    #[test]
    fn a_long_legend_wraps_into_rows_and_the_plot_moves_down() {
        let mut c = chart(false);
        let one_row = c.svg();
        c.series = (0..9)
            .map(|i| Series {
                name: format!("a rather long series name {i}"),
                points: vec![(1.0, f64::from(i))],
                style: Style::Points,
                bars: Vec::new(),
            })
            .collect();
        let svg = c.svg();
        let frame = |svg: &str| -> f64 {
            let end = svg.find("fill=\"none\" stroke=\"#333\"").unwrap();
            let rect = &svg[svg[..end].rfind("<rect").unwrap()..end];
            let at = rect.find(" y=\"").unwrap() + 4;
            rect[at..at + rect[at..].find('"').unwrap()]
                .parse()
                .unwrap()
        };
        assert_eq!(frame(&one_row), TOP);
        assert!(frame(&svg) >= TOP + 2.0 * LEGEND_ROW, "{svg}");
        for i in 0..9 {
            assert!(svg.contains(&format!(">a rather long series name {i}</text>")));
        }
        // No legend entry starts beyond the right edge.
        for (at, _) in svg.match_indices("<rect x=\"") {
            let rest = &svg[at + 9..];
            let x: f64 = rest[..rest.find('"').unwrap()].parse().unwrap();
            assert!(x < W - RIGHT, "{x}");
        }
    }
}
