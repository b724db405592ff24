//! The IMEX domain a machine belongs to, for the process record (issue 27): FABRIC handles and
//! the 13.3 logical endpoints are shared within one IMEX domain only, so readers of many hosts'
//! traces tell by it which exports an import may match.
//!
//! NVIDIA's IMEX service (`nvidia-imex`) runs on every node of a domain with the same list of the
//! domain's nodes: `IMEX_NODE_CONFIG_FILE` of its `config.cfg` (by default
//! `/etc/nvidia-imex/nodes_config.cfg`), one IP address per line; the service checks at start
//! that every node's list is the same. The domain is named here by a digest of that list (its
//! entries sorted, so the order of the lines does not matter) and its size. Where the node
//! cannot see the file (a container, a Kubernetes ComputeDomain), `SHARECHECK_IMEX_DOMAIN`
//! names the domain instead.

use std::path::Path;

/// Where the IMEX service's configuration is.
pub const CONFIG_DIR: &str = "/etc/nvidia-imex";

/// A domain, as the process record names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Domain {
    /// The digest of the domain's node list (16 hex digits), or the name the user gave.
    pub id: String,
    /// How many nodes the list names (none when the user named the domain).
    pub nodes: Option<usize>,
}

/// The domain the IMEX configuration under `dir` describes: `None` when there is no readable
/// node list with at least one node.
pub fn domain_of(dir: &Path) -> Option<Domain> {
    let config = std::fs::read_to_string(dir.join("config.cfg")).unwrap_or_default();
    let named = config.lines().find_map(|line| {
        let (key, value) = line.trim().split_once('=')?;
        (key.trim() == "IMEX_NODE_CONFIG_FILE").then(|| value.trim().to_string())
    });
    let list = match named.filter(|v| !v.is_empty()) {
        Some(file) => dir.join(file),
        None => dir.join("nodes_config.cfg"),
    };
    let text = std::fs::read_to_string(list).ok()?;
    let mut nodes: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    if nodes.is_empty() {
        return None;
    }
    // FNV-1a over the sorted entries, each ended by a newline.
    let digest = nodes
        .iter()
        .flat_map(|n| n.bytes().chain([b'\n']))
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    Some(Domain {
        id: format!("{digest:016x}"),
        nodes: Some(nodes.len()),
    })
}

/// This machine's domain: the one `SHARECHECK_IMEX_DOMAIN` names, else the one its IMEX
/// configuration describes.
pub fn domain() -> Option<Domain> {
    match std::env::var(crate::schema::env::IMEX_DOMAIN) {
        Ok(id) if !id.trim().is_empty() => Some(Domain {
            id: id.trim().to_string(),
            nodes: None,
        }),
        _ => domain_of(Path::new(CONFIG_DIR)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[(&str, &str)]) -> std::path::PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "sharecheck-imex-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        dir
    }

    /// Every node of a domain has the same list, in any order, with its comments and blank
    /// lines: one id. Another list is another domain; no list, or an empty one, is none.
    #[test]
    fn one_node_list_names_one_domain_whatever_its_order() {
        let a = dir_with(&[("nodes_config.cfg", "10.0.0.1\n10.0.0.2\n")]);
        let b = dir_with(&[(
            "nodes_config.cfg",
            "# rack 7\n\n 10.0.0.2\n10.0.0.1\n10.0.0.1\n",
        )]);
        let c = dir_with(&[("nodes_config.cfg", "10.0.0.1\n10.0.0.3\n")]);
        let (da, db, dc) = (
            domain_of(&a).unwrap(),
            domain_of(&b).unwrap(),
            domain_of(&c).unwrap(),
        );
        assert_eq!(da, db);
        assert_eq!(da.nodes, Some(2));
        assert_eq!(da.id.len(), 16);
        assert_ne!(da.id, dc.id);
        assert_eq!(
            domain_of(&dir_with(&[("nodes_config.cfg", "# none\n\n")])),
            None
        );
        assert_eq!(domain_of(&dir_with(&[])), None);
    }

    /// `IMEX_NODE_CONFIG_FILE` of `config.cfg` says where the list is.
    #[test]
    fn the_service_s_config_names_the_node_list() {
        let d = dir_with(&[
            (
                "config.cfg",
                "SERVER_PORT=50000\nIMEX_NODE_CONFIG_FILE = my_nodes.cfg\n",
            ),
            ("my_nodes.cfg", "192.168.1.5\n"),
            ("nodes_config.cfg", "10.0.0.1\n10.0.0.2\n"),
        ]);
        assert_eq!(domain_of(&d).unwrap().nodes, Some(1));
    }
}
