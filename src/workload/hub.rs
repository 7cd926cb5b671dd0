//! Files of a Hugging Face model or dataset repository, from the local cache or downloaded
//! into it.
//!
//! The cache is the one Python tools share (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
//! `~/.cache/huggingface/hub`), in its layout: `models--org--name/blobs/<etag>` (a dataset's
//! under `datasets--org--name`), `snapshots/<commit>/<file>` linking to the blob,
//! `refs/<revision>` naming the commit. A file missing there is fetched from `$HF_ENDPOINT`
//! (default `https://huggingface.co`) at `/<id>/resolve/<revision>/<file>` (a dataset's at
//! `/datasets/<id>/…`), following the hub's redirect to its file store, with `$HF_TOKEN` for
//! gated repositories; `HF_HUB_OFFLINE=1` never asks the network.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::WorkloadError;
use crate::blocking::{self, To};
use crate::endpoint::Endpoint;

/// The largest file fetched: the largest tokenizer.json files are a few tens of MB, and
/// ShareGPT's file about 640 MB.
const FILE_CAP: usize = 1 << 30;

/// A kind of hub repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repo {
    /// A model's (its tokenizer).
    Model,
    /// A dataset's.
    Dataset,
}

impl Repo {
    fn word(self) -> &'static str {
        match self {
            Repo::Model => "model",
            Repo::Dataset => "dataset",
        }
    }

    /// What to do instead of downloading.
    fn instead(self) -> &'static str {
        match self {
            Repo::Model => "pass the path of a tokenizer.json",
            Repo::Dataset => "pass the file with --input-file",
        }
    }
}
/// Time allowed for one download.
const TIMEOUT: Duration = Duration::from_secs(300);

/// Why a file of a hub repository could not be had, each with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not in the cache, and `HF_HUB_OFFLINE` forbids the download.
    #[error(
        "{name} of {id} (revision {revision}) is not in the Hugging Face cache ({cache}) and \
         HF_HUB_OFFLINE is set: download it once with the network, or {instead}"
    )]
    Offline {
        /// The file.
        name: String,
        /// The repository.
        id: String,
        /// The revision asked for.
        revision: String,
        /// The cache folder.
        cache: String,
        /// What to do instead of downloading.
        instead: &'static str,
    },
    /// The hub answered 401.
    #[error(
        "{id}: the hub answered 401: the {what} is gated or private; set HF_TOKEN to a token \
         that may read it"
    )]
    Gated {
        /// The repository.
        id: String,
        /// `model` or `dataset`.
        what: &'static str,
    },
    /// The hub answered 403.
    #[error(
        "{id}: the hub answered 403: this token may not read the {what}; accept its terms on \
         the {what}'s page, or use a token that has"
    )]
    Forbidden {
        /// The repository.
        id: String,
        /// `model` or `dataset`.
        what: &'static str,
    },
    /// The hub answered 404.
    #[error(
        "{id}: the hub has no {name} at revision {revision} ({url} answered 404): is the \
         {what} id right?"
    )]
    NotFound {
        /// The repository.
        id: String,
        /// The file.
        name: String,
        /// The revision asked for.
        revision: String,
        /// The URL asked.
        url: String,
        /// `model` or `dataset`.
        what: &'static str,
    },
    /// Another status.
    #[error("{url}: the hub answered HTTP {status}")]
    Status {
        /// The URL asked.
        url: String,
        /// Its status.
        status: u16,
    },
    /// The hub cannot be reached.
    #[error(
        "cannot reach {endpoint} ({why}); {name} of {id} is not in the cache ({cache}): \
         {instead}, or run where the hub can be reached"
    )]
    Unreachable {
        /// `$HF_ENDPOINT`.
        endpoint: String,
        /// Why (the connection, TLS, a redirect).
        #[source]
        why: Net,
        /// The file.
        name: String,
        /// The repository.
        id: String,
        /// The cache folder.
        cache: String,
        /// What to do instead of downloading.
        instead: &'static str,
    },
    /// The download could not be written into the cache.
    #[error("writing to the cache {cache}: {source}")]
    Store {
        /// The cache folder.
        cache: String,
        /// The system's error.
        source: std::io::Error,
    },
}

/// Where the hub is and how to talk to it, from the environment Python tools read. (No
/// `Debug`: it holds the token.)
#[derive(Clone)]
pub struct Hub {
    /// `$HF_ENDPOINT`.
    pub endpoint: String,
    /// `$HF_TOKEN` (or the older `$HUGGING_FACE_HUB_TOKEN`).
    pub(crate) token: Option<String>,
    /// `$HF_HUB_OFFLINE` set to 1 (or true).
    pub offline: bool,
    /// The cache folder.
    pub cache: PathBuf,
}

impl Hub {
    /// The settings of this process's environment.
    pub fn from_env() -> Hub {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let cache = var("HF_HUB_CACHE")
            .map(PathBuf::from)
            .or_else(|| var("HF_HOME").map(|h| PathBuf::from(h).join("hub")))
            .unwrap_or_else(|| {
                PathBuf::from(var("HOME").unwrap_or_default()).join(".cache/huggingface/hub")
            });
        let token = var("HF_TOKEN").or_else(|| var("HUGGING_FACE_HUB_TOKEN"));
        crate::redact::install(token.iter());
        Hub {
            endpoint: var("HF_ENDPOINT")
                .unwrap_or_else(|| "https://huggingface.co".into())
                .trim_end_matches('/')
                .to_string(),
            token,
            offline: var("HF_HUB_OFFLINE")
                .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true")),
            cache,
        }
    }

    fn repo(&self, kind: Repo, id: &str) -> PathBuf {
        self.cache
            .join(format!("{}s--{}", kind.word(), id.replace('/', "--")))
    }

    /// `name` of model `id` at `revision`, if the cache holds it.
    pub fn cached(&self, id: &str, revision: &str, name: &str) -> Option<PathBuf> {
        self.cached_in(Repo::Model, id, revision, name)
    }

    fn cached_in(&self, kind: Repo, id: &str, revision: &str, name: &str) -> Option<PathBuf> {
        let repo = self.repo(kind, id);
        let snapshots = repo.join("snapshots");
        let commit = if is_commit(revision) {
            revision.to_string()
        } else {
            std::fs::read_to_string(repo.join("refs").join(revision))
                .ok()?
                .trim()
                .to_string()
        };
        let f = snapshots.join(commit).join(name);
        f.is_file().then_some(f)
    }

    /// `name` of model `id` at `revision`: from the cache, else downloaded into it (a line on
    /// stderr says so).
    pub fn file(&self, id: &str, revision: &str, name: &str) -> Result<PathBuf, WorkloadError> {
        Ok(self.file_in(Repo::Model, id, revision, name)?)
    }

    /// `name` of dataset `id` at `revision`, as [`Hub::file`] gets a model's; `Err` says why
    /// not.
    pub fn dataset_file(
        &self,
        id: &str,
        revision: &str,
        name: &str,
    ) -> Result<PathBuf, Box<Error>> {
        self.file_in(Repo::Dataset, id, revision, name)
    }

    fn file_in(
        &self,
        kind: Repo,
        id: &str,
        revision: &str,
        name: &str,
    ) -> Result<PathBuf, Box<Error>> {
        let (what, instead) = (kind.word(), kind.instead());
        if let Some(f) = self.cached_in(kind, id, revision, name) {
            return Ok(f);
        }
        let cache = || self.cache.display().to_string();
        if self.offline {
            return Err(Box::new(Error::Offline {
                name: name.into(),
                id: id.into(),
                revision: revision.into(),
                cache: cache(),
                instead,
            }));
        }
        let url = match kind {
            Repo::Model => format!("{}/{id}/resolve/{revision}/{name}", self.endpoint),
            Repo::Dataset => format!(
                "{}/datasets/{id}/resolve/{}/{name}",
                self.endpoint,
                revision.replace('/', "%2F")
            ),
        };
        crate::redact::say!(
            "ringperf: downloading {name} of {id} from {} …",
            self.endpoint
        );
        let got = self.fetch(&url).map_err(|e| {
            Box::new(match e {
                Fetch::Status(401) => Error::Gated {
                    id: id.into(),
                    what,
                },
                Fetch::Status(403) => Error::Forbidden {
                    id: id.into(),
                    what,
                },
                Fetch::Status(404) => Error::NotFound {
                    id: id.into(),
                    name: name.into(),
                    revision: revision.into(),
                    url: url.clone(),
                    what,
                },
                Fetch::Status(status) => Error::Status {
                    url: url.clone(),
                    status,
                },
                Fetch::Net(why) => Error::Unreachable {
                    endpoint: self.endpoint.clone(),
                    why,
                    name: name.into(),
                    id: id.into(),
                    cache: cache(),
                    instead,
                },
            })
        })?;
        let path = self
            .store(kind, id, revision, name, &got)
            .map_err(|source| {
                Box::new(Error::Store {
                    cache: cache(),
                    source,
                })
            })?;
        crate::redact::say!(
            "ringperf: {name} of {id}: {:.1} MB into {}",
            got.body.len() as f64 / 1e6,
            path.display()
        );
        Ok(path)
    }

    /// GET `url`, following up to five redirects; the token goes only to the hub itself.
    fn fetch(&self, url: &str) -> Result<Got, Fetch> {
        let parse = |u: &str| Endpoint::parse(u).map_err(|e| Fetch::Net(Net::Url(e)));
        let hub = parse(&self.endpoint)?.origin();
        let mut url = parse(url)?;
        let mut commit = None;
        let mut etag = None;
        for _ in 0..5 {
            let token = self.token.as_deref().filter(|_| url.origin() == hub);
            let r = get(&url, token)?;
            // The hub names the commit and the file's hash on the redirect to its file store.
            let header = |n: &str| r.header(n).map(str::to_string);
            commit = commit.or_else(|| header("x-repo-commit"));
            etag = etag
                .or_else(|| header("x-linked-etag"))
                .or_else(|| header("etag"));
            let location = header("location");
            match r.status {
                200 => {
                    return Ok(Got {
                        body: r.body,
                        commit,
                        etag: etag
                            .map(|e| e.trim_start_matches("W/").trim_matches('"').to_string()),
                    })
                }
                301 | 302 | 303 | 307 | 308 => {
                    let to = location.ok_or(Fetch::Net(Net::NoLocation))?;
                    url = parse(&if to.starts_with('/') {
                        format!("{}{to}", url.origin())
                    } else {
                        to
                    })?;
                }
                s => return Err(Fetch::Status(s)),
            }
        }
        Err(Fetch::Net(Net::TooManyRedirects))
    }

    /// Writes a downloaded file into the cache layout and returns its snapshot path.
    fn store(
        &self,
        kind: Repo,
        id: &str,
        revision: &str,
        name: &str,
        got: &Got,
    ) -> std::io::Result<PathBuf> {
        let repo = self.repo(kind, id);
        let commit = got
            .commit
            .clone()
            .filter(|c| is_commit(c))
            .unwrap_or_else(|| revision.to_string());
        let blob_name = got
            .etag
            .clone()
            .unwrap_or_else(|| format!("{commit}-{name}"));
        let blobs = repo.join("blobs");
        std::fs::create_dir_all(&blobs)?;
        let blob = blobs.join(&blob_name);
        let partial = blobs.join(format!("{blob_name}.incomplete"));
        std::fs::write(&partial, &got.body)?;
        std::fs::rename(&partial, &blob)?;
        let snapshot = repo.join("snapshots").join(&commit);
        let dest = snapshot.join(name);
        std::fs::create_dir_all(dest.parent().unwrap_or(&snapshot))?;
        let _ = std::fs::remove_file(&dest);
        // A relative link, as huggingface_hub makes; a copy where links are refused.
        let depth = name.matches('/').count() + 2;
        let target = Path::new(&"../".repeat(depth))
            .join("blobs")
            .join(&blob_name);
        if std::os::unix::fs::symlink(&target, &dest).is_err() {
            std::fs::copy(&blob, &dest)?;
        }
        if revision != commit {
            // A revision with slashes (`refs/convert/parquet`) nests, as huggingface_hub lays
            // it out.
            let at = repo.join("refs").join(revision);
            std::fs::create_dir_all(at.parent().unwrap_or(&repo))?;
            std::fs::write(at, &commit)?;
        }
        Ok(dest)
    }
}

fn is_commit(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A downloaded file.
struct Got {
    body: Vec<u8>,
    commit: Option<String>,
    etag: Option<String>,
}

enum Fetch {
    Status(u16),
    Net(Net),
}

/// Why the hub could not be reached, or its answer followed.
#[derive(Debug, thiserror::Error)]
pub enum Net {
    /// A URL (`$HF_ENDPOINT`, a redirect's) that is not one ringperf can reach.
    #[error("{0}")]
    Url(#[source] crate::endpoint::UrlError),
    /// The TLS client could not be configured.
    #[error("{0}")]
    Tls(#[source] crate::tls::TlsError),
    /// The exchange failed.
    #[error("{0}")]
    Exchange(#[source] blocking::Error),
    /// A redirect without a place to go.
    #[error("a redirect without a Location")]
    NoLocation,
    /// Redirects beyond the five followed.
    #[error("more than five redirects")]
    TooManyRedirects,
}

/// One GET, the connection closed after it.
fn get(url: &Endpoint, token: Option<&str>) -> Result<blocking::Fetched, Fetch> {
    let config = if url.tls {
        Some(crate::tls::client_config(None, false).map_err(|e| Fetch::Net(Net::Tls(e)))?)
    } else {
        None
    };
    let mut headers = Vec::new();
    if let Some(t) = token {
        headers.push(("Authorization".to_string(), format!("Bearer {t}")));
    }
    let path = if url.prefix.is_empty() {
        "/"
    } else {
        url.prefix.as_str()
    };
    let request = blocking::request("GET", path, &url.authority(), &headers, "*/*");
    blocking::fetch(&To::of(url, config.as_ref()), &request, TIMEOUT, FILE_CAP)
        .map_err(|e| Fetch::Net(Net::Exchange(e)))
}
