//! file:line for the frames of findings' stacks, in `sharecheck report`: each module is asked
//! once, with every offset the report shows from it, through binutils' `addr2line` where it is
//! installed and the module still exists. Without either, frames stay `module+offset`.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

/// `(module, offset)` -> `function at file:line`, for what could be resolved.
#[derive(Debug, Default)]
pub struct Symbols {
    resolved: BTreeMap<(String, u64), String>,
}

impl Symbols {
    /// Resolves `frames` (module, offset), one `addr2line` run per module.
    pub fn resolve(frames: impl IntoIterator<Item = (String, u64)>) -> Symbols {
        let mut by_module: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for (module, offset) in frames {
            let offsets = by_module.entry(module).or_default();
            if !offsets.contains(&offset) {
                offsets.push(offset);
            }
        }
        let mut symbols = Symbols::default();
        for (module, offsets) in by_module {
            if !std::path::Path::new(&module).is_file() {
                continue;
            }
            let Some(lines) = addr2line(&module, &offsets) else {
                continue;
            };
            for (offset, place) in offsets.iter().zip(lines) {
                if let Some(place) = place {
                    symbols.resolved.insert((module.clone(), *offset), place);
                }
            }
        }
        symbols
    }

    pub fn get(&self, module: &str, offset: u64) -> Option<&str> {
        self.resolved
            .get(&(module.to_string(), offset))
            .map(String::as_str)
    }
}

/// `addr2line -f -C -e MODULE 0x...`: two lines an address (function, file:line); `??` where
/// there is no debug information. `None` when the tool is missing or fails.
fn addr2line(module: &str, offsets: &[u64]) -> Option<Vec<Option<String>>> {
    let out = Command::new("addr2line")
        .args(["-f", "-C", "-e", module])
        .args(offsets.iter().map(|o| format!("{o:#x}")))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() != 2 * offsets.len() {
        return None;
    }
    Some(
        lines
            .chunks(2)
            .map(|pair| {
                let (function, place) = (pair[0], pair[1]);
                if place.starts_with("??") {
                    return None;
                }
                // `file:line (discriminator N)`: the discriminator says nothing to a reader.
                let place = place.split(" (discriminator").next().unwrap_or(place);
                Some(if function == "??" {
                    place.to_string()
                } else {
                    format!("{function} at {place}")
                })
            })
            .collect(),
    )
}
