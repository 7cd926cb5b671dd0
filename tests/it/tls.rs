//! https end to end: the simulator serves TLS with a certificate made here, at test time.

use crate::support;

use crate::support::{artifact_dir, profile};

pub(crate) struct Certs {
    dir: std::path::PathBuf,
}

impl Certs {
    pub(crate) fn make(name: &str) -> Certs {
        Certs::make_for(name, &["localhost", "127.0.0.1"], false)
    }
    /// `ca`: marked as a CA, as `openssl req -x509` marks a self-signed certificate.
    fn make_for(name: &str, names: &[&str], ca: bool) -> Certs {
        let dir = artifact_dir(name);
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        if ca {
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        }
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
        Certs { dir }
    }
    /// The simulator serving https with these certificates, plus `flags`.
    pub(crate) fn sim(&self, flags: &str) -> ringperf::sim::SimHandle {
        support::sim(&format!(
            "{flags} --tls-cert {} --tls-key {}",
            self.path("cert.pem"),
            self.path("key.pem")
        ))
    }
    pub(crate) fn path(&self, f: &str) -> String {
        self.dir.join(f).to_str().unwrap().to_string()
    }
}

#[test]
fn an_untrusted_certificate_fails_the_handshake_and_insecure_accepts_it() {
    let _shared = support::shared();
    let certs = Certs::make("tls-untrusted");
    let s = certs.sim("--itl 100us");
    let url = format!("https://127.0.0.1:{}", s.addr.port());
    let dir = artifact_dir("tls-untrusted-run");
    // The web PKI roots do not know a certificate made a moment ago: the preflight says so
    // before the run, and the run itself counts each failed handshake.
    let err = |flags: &str| {
        profile(&format!("--url {url} --request-count 2 {flags}"), &dir)
            .err()
            .expect("handshake fails")
            .to_string()
    };
    let e = err("");
    assert!(
        e.contains("TLS handshake") && e.contains("UnknownIssuer") && e.contains("--ca-cert"),
        "{e}"
    );
    let e = err("--no-preflight -m ringperf-sim");
    assert!(e.contains("tls_failed"), "{e}");
    let res = profile(&format!("--url {url} --insecure --request-count 2"), &dir).unwrap();
    assert_eq!(res.report.completed, 2);
}

#[test]
fn a_self_signed_ca_certificate_given_with_ca_cert_is_trusted_for_its_names() {
    let _shared = support::shared();
    let certs = Certs::make_for("tls-ca-self", &["localhost", "127.0.0.1"], true);
    let s = certs.sim("--itl 100us");
    let ca = certs.path("cert.pem");
    let dir = artifact_dir("tls-ca-self-run");
    for host in ["localhost", "127.0.0.1"] {
        let url = format!("https://{host}:{}", s.addr.port());
        let res = profile(
            &format!("--url {url} --ca-cert {ca} --request-count 2"),
            &dir,
        )
        .unwrap_or_else(|e| panic!("{host}: {e}"));
        assert_eq!(res.report.completed, 2);
    }
    // Trusted as it is, but only for the names it carries.
    let other = Certs::make_for("tls-ca-other", &["example.test"], true);
    let s = other.sim("--itl 100us");
    let url = format!("https://localhost:{}", s.addr.port());
    let err = profile(
        &format!(
            "--url {url} --ca-cert {} --request-count 2",
            other.path("cert.pem")
        ),
        &dir,
    )
    .err()
    .expect("a name that does not match fails")
    .to_string();
    assert!(
        err.contains("TLS handshake") && err.contains("NotValidForName"),
        "{err}"
    );
}

#[test]
fn a_scheme_that_does_not_match_the_port_says_so() {
    let _shared = support::shared();
    let certs = Certs::make("tls-mixup");
    let tls = certs.sim("--itl 100us");
    let plain = support::sim("");
    let dir = artifact_dir("tls-mixup-run");
    let err = |url: String| {
        profile(&format!("--url {url} --request-count 1"), &dir)
            .err()
            .expect("fails")
            .to_string()
    };
    let e = err(format!("http://127.0.0.1:{}", tls.addr.port()));
    assert!(e.contains("use https://"), "{e}");
    let e = err(format!("https://127.0.0.1:{}", plain.addr.port()));
    assert!(e.contains("is it an http:// port?"), "{e}");
    // A self-signed certificate not given with --ca-cert: the error says how to trust it.
    let e = err(format!("https://localhost:{}", tls.addr.port()));
    assert!(e.contains("--ca-cert FILE"), "{e}");
}
