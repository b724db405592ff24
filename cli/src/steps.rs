//! Each IPC handle's steps, grouped by handle, for the JSON report (issue 27): the timeline gives
//! the steps of every handle mixed, in time order, and the report lists one handle's after
//! another's. Each step's JSON is appended to an unnamed temporary file and linked to the next
//! step of its handle, so what stays in memory is two numbers per handle, however many steps
//! there are (in memory instead when no temporary file can be made).

use std::os::unix::fs::FileExt;

/// Bytes appended before they are written out.
const PENDING: usize = 1 << 20;
/// No next step.
const END: u64 = u64::MAX;

/// Steps of many handles, each handle's in the order given.
#[derive(Default)]
pub struct Chains {
    file: Option<std::fs::File>,
    /// The bytes from `flushed` on (all of them without a file).
    pending: Vec<u8>,
    flushed: u64,
    /// Each handle's first step and last step (where each step starts).
    ends: Vec<(u64, u64)>,
}

impl Chains {
    pub fn new() -> Chains {
        Chains {
            file: tempfile::tempfile().ok(),
            ..Chains::default()
        }
    }

    /// Appends a step of handle `handle` (handles are numbered from 0 in the order of their first
    /// step).
    pub fn push(&mut self, handle: usize, step: &[u8]) -> std::io::Result<()> {
        let at = self.flushed + self.pending.len() as u64;
        self.pending.extend_from_slice(&END.to_le_bytes());
        self.pending
            .extend_from_slice(&(step.len() as u64).to_le_bytes());
        self.pending.extend_from_slice(step);
        match self.ends.get_mut(handle) {
            Some((_, last)) => {
                let previous = std::mem::replace(last, at);
                self.link(previous, at)?;
            }
            None => self.ends.push((at, at)),
        }
        if self.pending.len() >= PENDING {
            if let Some(file) = &self.file {
                file.write_all_at(&self.pending, self.flushed)?;
                self.flushed += self.pending.len() as u64;
                self.pending.clear();
            }
        }
        Ok(())
    }

    /// Makes the step at `from` point to the one at `to`.
    fn link(&mut self, from: u64, to: u64) -> std::io::Result<()> {
        let bytes = to.to_le_bytes();
        match from.checked_sub(self.flushed) {
            Some(i) => {
                let i = i as usize;
                self.pending[i..i + 8].copy_from_slice(&bytes);
                Ok(())
            }
            None => match &self.file {
                Some(file) => file.write_all_at(&bytes, from),
                None => Ok(()),
            },
        }
    }

    /// Handle `handle`'s steps, in order, each given to `each`.
    pub fn each(
        &self,
        handle: usize,
        mut each: impl FnMut(&[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let mut window = Window::default();
        let Some(&(mut at, _)) = self.ends.get(handle) else {
            return Ok(());
        };
        while at != END {
            let head = self.read(&mut window, at, 16)?;
            let next = u64::from_le_bytes(head[..8].try_into().unwrap_or_default());
            let len = u64::from_le_bytes(head[8..16].try_into().unwrap_or_default());
            let step = self.read(&mut window, at + 16, len as usize)?;
            each(&step)?;
            at = next;
        }
        Ok(())
    }

    /// `n` bytes at `at`, from what is pending or the file (through `window`).
    fn read(&self, window: &mut Window, at: u64, n: usize) -> std::io::Result<Vec<u8>> {
        if let Some(i) = at.checked_sub(self.flushed) {
            let i = i as usize;
            return self
                .pending
                .get(i..i + n)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| std::io::ErrorKind::UnexpectedEof.into());
        }
        let file = self
            .file
            .as_ref()
            .ok_or(std::io::ErrorKind::UnexpectedEof)?;
        window.get(file, at, n)
    }
}

/// Part of the file, read ahead (the steps of one handle are mostly near each other).
#[derive(Default)]
struct Window {
    start: u64,
    bytes: Vec<u8>,
}

impl Window {
    fn get(&mut self, file: &std::fs::File, at: u64, n: usize) -> std::io::Result<Vec<u8>> {
        let inside = at >= self.start && at + n as u64 <= self.start + self.bytes.len() as u64;
        if !inside {
            self.bytes.resize(n.max(1 << 16), 0);
            let mut filled = 0;
            while filled < self.bytes.len() {
                let got = file.read_at(&mut self.bytes[filled..], at + filled as u64)?;
                if got == 0 {
                    break;
                }
                filled += got;
            }
            self.bytes.truncate(filled);
            self.start = at;
            if filled < n {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        let i = (at - self.start) as usize;
        Ok(self.bytes[i..i + n].to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(chains: &Chains, handle: usize) -> Vec<String> {
        let mut out = Vec::new();
        chains
            .each(handle, |s| {
                out.push(String::from_utf8(s.to_vec()).unwrap());
                Ok(())
            })
            .unwrap();
        out
    }

    /// Steps given mixed come back grouped by handle, each handle's in order, whether they were
    /// written out to the file (past the pending bytes) or not.
    #[test]
    fn steps_come_back_by_handle_in_order() {
        for file in [true, false] {
            let mut chains = if file {
                Chains::new()
            } else {
                Chains::default()
            };
            assert_eq!(chains.file.is_some(), file);
            // Enough steps that most are written out (in the file case).
            let n = 4 * (PENDING / 50);
            for i in 0..n {
                let handle = [0, 1, 0, 2][i % 4];
                chains
                    .push(handle, format!("{handle}:{i:020}").as_bytes())
                    .unwrap();
            }
            if file {
                assert!(chains.flushed > 0, "nothing was written out");
            }
            assert_eq!(chains.ends.len(), 3);
            let zero = steps(&chains, 0);
            assert_eq!(zero.len(), n / 2);
            assert_eq!(zero[0], format!("0:{:020}", 0));
            assert_eq!(zero[1], format!("0:{:020}", 2));
            assert_eq!(zero.last().unwrap(), &format!("0:{:020}", n - 2));
            let two = steps(&chains, 2);
            assert_eq!(two.len(), n / 4);
            assert!(two.windows(2).all(|w| w[0] < w[1]));
            assert!(two.iter().all(|s| s.starts_with("2:")));
            assert!(steps(&chains, 3).is_empty());
        }
    }
}
