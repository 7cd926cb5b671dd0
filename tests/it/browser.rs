//! The reports as a person sees them: each page is opened in headless Chromium (Debian's
//! package; no WebDriver), which lays it out and runs a checking script put into a copy of the
//! page. The page fails on a script error, on any resource it loads (every network request goes
//! to a proxy this test holds, so even one that fails is seen), on a chart with nothing drawn
//! in it, on a legend entry that does not hide and show its series when clicked, on a time
//! chart that does not zoom to the range dragged across (and back on a double-click), and on a
//! point without the values it shows when hovered. The checker itself is shown to catch each
//! of these on a page built to have it.
//!
//! Without Chromium the test says so and passes, unless `RINGPERF_REQUIRE_BROWSER` is set
//! (`.ci/run` installs Chromium and sets it). `RINGPERF_CHROMIUM` names another browser binary.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::Value;

use crate::support;

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RINGPERF_CHROMIUM") {
        return Some(p.into());
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|b| std::env::split_paths(&path).map(move |d| d.join(b)))
        .find(|p| p.is_file())
}

/// A proxy that reads each request's first line and drops the connection, keeping the lines.
struct Proxy {
    port: u16,
    thread: std::thread::JoinHandle<Vec<String>>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    fn start() -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for c in l.incoming() {
                if st.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(mut c) = c else { continue };
                let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                let mut buf = [0u8; 512];
                let n = c.read(&mut buf).unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]);
                seen.push(head.lines().next().unwrap_or("").to_string());
            }
            seen
        });
        Proxy { port, thread, stop }
    }

    /// Stops (a connection of its own wakes the accept) and returns every request line seen.
    fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
        self.thread.join().unwrap()
    }
}

/// Put first into the page's head: records script errors, and once the page has loaded,
/// writes what it found into the page for `--dump-dom` to print.
const CHECK: &str = r#"<script>window.__errors=[];
addEventListener('error',e=>__errors.push(String(e.message||e.target&&e.target.outerHTML)),true);
addEventListener('load',()=>{
const charts=[...document.querySelectorAll('svg')].filter(s=>!s.parentNode.closest('svg')).map(s=>({
 title:(s.querySelector('title')||{}).textContent||'',
 width:s.getBoundingClientRect().width,
 marks:[...s.querySelectorAll('circle,polyline,path')].filter(m=>{const b=m.getBBox();return b.width>0||b.height>0}).length,
 nodata:s.textContent.includes('no data'),
 untitled:[...s.querySelectorAll('circle')].filter(c=>!c.querySelector('title')).length,
 toggles:(()=>{const l=s.querySelector('g.legend');if(!l)return null;
  const g=s.querySelector('g.series[data-series="'+l.dataset.series+'"]');
  const click=()=>l.dispatchEvent(new MouseEvent('click',{bubbles:true}));
  click();const hidden=getComputedStyle(g).display==='none';
  click();return hidden&&getComputedStyle(g).display!=='none';})(),
 zooms:(()=>{const p=s.querySelector('svg.plot');if(!p)return null;
  const r=p.getBoundingClientRect(),g=s.querySelector('g.xticks'),t0=g.textContent;
  const vb=()=>p.getAttribute('viewBox').split(' ').map(Number),v0=vb();
  const ev=(type,x)=>p.dispatchEvent(new MouseEvent(type,{bubbles:true,clientX:x,clientY:r.top+r.height/2}));
  ev('mousedown',r.left+r.width*0.25);ev('mouseup',r.left+r.width*0.75);
  // (A mouse event's clientX is whole pixels: the half is within 2%.)
  const zoomed=Math.abs(vb()[2]-v0[2]/2)<v0[2]*0.02&&g.textContent!==t0;
  ev('dblclick',r.left+10);
  return zoomed&&vb().every((v,i)=>Math.abs(v-v0[i])<1e-6)&&g.textContent===t0;})()}));
const r=document.createElement('pre');r.id='ringperf-check';
r.textContent=JSON.stringify({errors:__errors,resources:performance.getEntriesByType('resource').map(e=>e.name),charts});
document.body.appendChild(r);});</script>"#;

/// What the browser found on `page`, and the requests that reached the proxy.
fn check(browser: &Path, page: &Path) -> (Value, Vec<String>) {
    let html = std::fs::read_to_string(page).unwrap();
    let copy = page.with_file_name(".ringperf-check.html");
    std::fs::write(&copy, html.replacen("<head>", &format!("<head>{CHECK}"), 1)).unwrap();
    let proxy = Proxy::start();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            // The browser's own traffic (updates, safe browsing, field trials) is not the
            // page's.
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--disable-domain-reliability",
            "--disable-client-side-phishing-detection",
            "--metrics-recording-only",
            "--no-pings",
            "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,Translate,\
             MediaRouter,AutofillServerCommunication,CertificateTransparencyComponentUpdater,\
             InterestFeedContentSuggestions,PrivacySandboxSettings4",
            "--virtual-time-budget=5000",
            &format!("--proxy-server=http://127.0.0.1:{}", proxy.port),
            // Loopback too goes through the proxy, but not the browser's own calls home to
            // google.com (search preconnects, accounts) and googleapis.com (its component
            // updater, which Chromium 156 ran once in a CI run despite
            // --disable-component-update), which no flag reliably turns off: they fail to
            // resolve, and a page's load from there is still in its resource entries.
            "--proxy-bypass-list=<-loopback>;*.google.com;google.com;*.googleapis.com;*.gvt1.com",
            "--host-resolver-rules=MAP *.google.com ~NOTFOUND, MAP google.com ~NOTFOUND, \
             MAP *.googleapis.com ~NOTFOUND, MAP *.gvt1.com ~NOTFOUND",
            "--dump-dom",
        ])
        .arg(format!("file://{}", copy.canonicalize().unwrap().display()))
        .output()
        .expect("chromium runs");
    let _ = std::fs::remove_file(&copy);
    let dom = String::from_utf8_lossy(&out.stdout);
    let start = dom.find("<pre id=\"ringperf-check\">").unwrap_or_else(|| {
        panic!(
            "{}: the check did not run (exit {:?}):\n{}",
            page.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    }) + "<pre id=\"ringperf-check\">".len();
    let text = &dom[start..start + dom[start..].find("</pre>").unwrap()];
    let text = text
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let seen = proxy.finish();
    (serde_json::from_str(&text).unwrap(), seen)
}

/// The faults of a page: script errors, resources, charts with nothing drawn.
fn faults(found: &Value, proxied: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for e in found["errors"].as_array().unwrap() {
        out.push(format!("script error: {e}"));
    }
    for r in found["resources"].as_array().unwrap() {
        out.push(format!("loads a resource: {r}"));
    }
    for r in proxied {
        out.push(format!("network request: {r}"));
    }
    for c in found["charts"].as_array().unwrap() {
        if c["marks"].as_u64() == Some(0)
            || c["nodata"] == true
            || c["width"].as_f64() < Some(100.0)
        {
            out.push(format!("empty chart: {}", c["title"]));
        }
        if c["zooms"] == false {
            out.push(format!(
                "dragging across the plot does not zoom: {}",
                c["title"]
            ));
        }
        if c["toggles"] == false {
            out.push(format!(
                "clicking the legend does not hide a series: {}",
                c["title"]
            ));
        }
        if c["untitled"].as_u64() > Some(0) {
            out.push(format!(
                "points that say nothing when hovered: {}",
                c["title"]
            ));
        }
    }
    out
}

#[test]
fn reports_render_in_a_browser_with_no_script_error_no_resource_and_no_empty_chart() {
    let _shared = support::shared();
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("RINGPERF_REQUIRE_BROWSER").is_none(),
            "RINGPERF_REQUIRE_BROWSER is set and no Chromium was found"
        );
        eprintln!("skipped: no Chromium (install Debian's chromium to run the browser test)");
        return;
    };
    let root = support::artifact_dir("browser");

    // The checker catches what it looks for.
    let bad = root.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    let page = bad.join("bad.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><head><title>bad</title></head><body>\
         <img src=\"http://ringperf.invalid/x.png\"><script>nope();</script>\
         <svg width=\"300\" height=\"100\"><title>empty</title><text x=\"10\" y=\"20\">no data</text></svg>\
         <svg width=\"300\" height=\"100\"><title>dead legend</title><g class=\"series\" data-series=\"0\">\
         <circle cx=\"10\" cy=\"10\" r=\"3\"/></g><g class=\"legend\" data-series=\"0\"><text x=\"20\" y=\"20\">s</text></g>\
         <g class=\"xticks\"><text x=\"10\" y=\"90\">1</text></g><svg class=\"plot\" x=\"0\" y=\"0\" \
         width=\"300\" height=\"80\" viewBox=\"0 0 300 80\"><rect width=\"300\" height=\"80\" \
         fill=\"none\" pointer-events=\"all\"/></svg></svg>\
         </body></html>",
    )
    .unwrap();
    let (found, proxied) = check(&browser, &page);
    let f = faults(&found, &proxied);
    assert!(f.iter().any(|f| f.starts_with("script error")), "{f:?}");
    assert!(f.iter().any(|f| f.contains("ringperf.invalid")), "{f:?}");
    assert!(!proxied.is_empty(), "{f:?}");
    assert!(f.iter().any(|f| f.starts_with("empty chart")), "{f:?}");
    assert!(
        f.iter().any(|f| f.starts_with("clicking the legend"))
            && f.iter().any(|f| f.starts_with("dragging across")),
        "{f:?}"
    );
    assert!(
        f.iter().any(|f| f.starts_with("points that say nothing")),
        "{f:?}"
    );

    // A sweep (its page and a point's), and a comparison with one of its points.
    let sweep = root.join("sweep");
    let out = support::ringperf()
        .args([
            "profile",
            "--sim=--ttft 5ms --itl 1ms --max-batch 4",
            "--streaming",
            "--concurrency",
            "1,8",
            "--request-count",
            "24",
            "--output-tokens-mean",
            "8",
            "--no-progress",
            "--artifact-dir",
        ])
        .arg(&sweep)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let compared = root.join("compare");
    let out = support::ringperf()
        .arg("compare")
        .arg(&sweep)
        .arg(sweep.join("concurrency_8"))
        .arg("--artifact-dir")
        .arg(&compared)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    for page in [
        sweep.join("report.html"),
        sweep.join("concurrency_8/report.html"),
        compared.join("compare.html"),
    ] {
        let (found, proxied) = check(&browser, &page);
        let f = faults(&found, &proxied);
        assert!(f.is_empty(), "{}: {f:?}", page.display());
        let charts = found["charts"].as_array().unwrap().len();
        assert!(charts >= 3, "{}: {charts} charts", page.display());
    }
}
