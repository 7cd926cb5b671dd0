//! Streaming over TLS, timed.

use crate::support::{self, artifact_dir, profile, rel};
use crate::tls::Certs;

#[test]
fn streaming_over_tls_with_a_test_made_certificate() {
    let _alone = support::alone();
    // Over TLS events are stamped when read (no kernel stamps through rustls), so the timing
    // checks below need the CPUs to themselves.
    let certs = Certs::make("tls-ok");
    let s = certs.sim("--ttft 30ms --itl 5ms");
    let url = format!("https://localhost:{}", s.addr.port());
    let ca = certs.path("cert.pem");
    let dir = artifact_dir("tls-run");
    let res = profile(&format!("--url {url} --ca-cert {ca} --streaming --concurrency 8 --request-count 32 --output-tokens-mean 16 --output-tokens-mean-deterministic"), &dir)
    .expect("TLS run completes");
    let r = &res.report;
    assert_eq!((r.completed, r.failed), (32, 0), "{}", res.console);
    assert_eq!(r.output_tokens, 32 * 16);
    let ttft = r.metrics.ttft.percentile(50.0) as f64;
    let itl = r.metrics.itl.percentile(50.0) as f64;
    assert!(rel(ttft, 30e6) < 0.05, "TTFT p50 {ttft}");
    assert!(rel(itl, 5e6) < 0.02, "ITL p50 {itl}");
    // Keep-alive works over TLS: far fewer connections than requests.
    assert!(r.records.iter().all(|x| !x.reconnected));
    // The HTTP phases: 8 connections, each with its TCP connect and TLS handshake; the
    // requests that reused one show zeros there, not missing values.
    let opened: Vec<_> = r.records.iter().filter(|x| x.tls_us > 0).collect();
    assert_eq!(opened.len(), 8, "one handshake per connection");
    assert!(opened.iter().all(|x| x.connect_us > 0));
    for x in &r.records {
        let p = x.http_phases().expect("every request had a response");
        assert_eq!(p.len(), 6);
        let reused = x.tls_us == 0;
        assert_eq!(
            (p[0].1 == 0, p[1].1 == 0),
            (reused && x.connect_us == 0, reused)
        );
        // Waiting ends at the first response byte, which comes with the first token here.
        let waiting = p[3].1 as f64;
        assert!(rel(waiting, x.ttft().unwrap() as f64) < 0.05, "{p:?}");
    }
}
