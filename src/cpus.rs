//! CPU lists: parsing `0,2-5`, printing them back as ranges, and the CPUs this process may use.

/// A CPU list that is not one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ListError {
    /// An item that is neither a CPU number nor a rising range.
    #[error("--cpus {list:?}: {item:?} is not a CPU number or range like 2-5")]
    Item {
        /// The whole list.
        list: String,
        /// The item.
        item: String,
    },
    /// A list with no item.
    #[error("--cpus {0:?} names no CPU")]
    Empty(String),
}

/// Parses `0,2-5` into CPU ids.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, ListError> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || ListError::Item {
            list: s.into(),
            item: part.into(),
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err(ListError::Empty(s.into()));
    }
    Ok(out)
}

/// The CPUs this process may run on.
pub fn usable_cpus() -> Vec<usize> {
    // Read before any thread is pinned: once pinned, the list shrinks to that core.
    core_affinity::get_core_ids()
        .map(|ids| ids.into_iter().map(|c| c.id).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
        })
}

/// `0-3,6` for a CPU list.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut s = cpus.to_vec();
    s.sort_unstable();
    s.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let mut j = i;
        while j + 1 < s.len() && s[j + 1] == s[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("{}-{}", s[i], s[j])
        } else {
            s[i].to_string()
        });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0,2-4").unwrap(), vec![0, 2, 3, 4]);
        let item = |item: &str, list: &str| {
            Err(ListError::Item {
                list: list.into(),
                item: item.into(),
            })
        };
        assert_eq!(parse_cpu_list("0,3-1"), item("3-1", "0,3-1"));
        assert_eq!(parse_cpu_list("x"), item("x", "x"));
        assert_eq!(parse_cpu_list("1-y"), item("1-y", "1-y"));
        assert_eq!(parse_cpu_list(" , "), Err(ListError::Empty(" , ".into())));
    }

    #[test]
    fn cpu_lists_print_as_ranges() {
        assert_eq!(cpu_list(&[3, 0, 1, 2, 6]), "0-3,6");
        assert_eq!(cpu_list(&[5]), "5");
        assert_eq!(cpu_list(&parse_cpu_list("0-2,7").unwrap()), "0-2,7");
    }
}
