//! Names and source lines for the frames of findings' stacks, in `sharecheck report`, read in
//! this process by blazesym: DWARF where the module has it (with the functions inlined at the
//! address), else the module's symbol table (a program built without `-g` still names `main`),
//! and debug files found through `.gnu_debuglink` or the build id (under `/usr/lib/debug`).
//! C++ and Rust names are demangled. Each module is read once; a module that is gone leaves its
//! frames `module+offset`.

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{CodeInfo, Input, Symbolized, Symbolizer};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// One function at a frame's address: a frame has one, plus one per function inlined there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    /// `file:line` of the address in this function, where debug information has it.
    pub file: Option<String>,
    pub line: Option<u32>,
}

impl Function {
    /// `name at file:line`, `name at file` or `name`.
    pub fn text(&self) -> String {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => format!("{} at {file}:{line}", self.name),
            (Some(file), None) => format!("{} at {file}", self.name),
            _ => self.name.clone(),
        }
    }
}

/// A frame's address: its module and the offset in the module's address space.
type Place = (String, u64);

/// `(module, offset)` -> the functions at that address, innermost (inlined) first: resolved on
/// first asking, each module read once (blazesym keeps what it parsed).
#[derive(Default)]
pub struct Symbols {
    /// Made when a first frame is resolved (most reports have none to resolve).
    symbolizer: std::cell::OnceCell<Symbolizer>,
    resolved: RefCell<BTreeMap<Place, Rc<[Function]>>>,
    missing: RefCell<BTreeSet<String>>,
}

impl std::fmt::Debug for Symbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Symbols({} resolved)", self.resolved.borrow().len())
    }
}

impl Symbols {
    /// The functions at `offset` of `module` (an offset in the module's address space, as the
    /// shim records it), innermost first; empty where nothing is known.
    pub fn functions(&self, module: &str, offset: u64) -> Rc<[Function]> {
        let key = (module.to_string(), offset);
        if let Some(known) = self.resolved.borrow().get(&key) {
            return known.clone();
        }
        let found: Rc<[Function]> = self.lookup(module, offset).into();
        self.resolved.borrow_mut().insert(key, found.clone());
        found
    }

    fn lookup(&self, module: &str, offset: u64) -> Vec<Function> {
        if self.missing.borrow().contains(module) {
            return Vec::new();
        }
        if !std::path::Path::new(module).is_file() {
            self.missing.borrow_mut().insert(module.to_string());
            return Vec::new();
        }
        let source = Source::Elf(Elf::new(module));
        // A module blazesym cannot read (not ELF, truncated) keeps its frames as they are.
        let Ok(sym) = self
            .symbolizer
            .get_or_init(Symbolizer::new)
            .symbolize_single(&source, Input::VirtOffset(offset))
        else {
            self.missing.borrow_mut().insert(module.to_string());
            return Vec::new();
        };
        let Symbolized::Sym(sym) = sym else {
            return Vec::new();
        };
        let mut functions = Vec::with_capacity(1 + sym.inlined.len());
        // blazesym lists the outer function first; each one's code information is where the
        // address lies in it (the next one's call site).
        functions.push(function(&sym.name, sym.code_info.as_deref()));
        for inlined in &sym.inlined {
            functions.push(function(&inlined.name, inlined.code_info.as_ref()));
        }
        functions.reverse();
        functions
    }

    /// The innermost function at `offset` of `module`, as text (`name at file:line`).
    pub fn get(&self, module: &str, offset: u64) -> Option<String> {
        self.functions(module, offset).first().map(Function::text)
    }
}
fn function(name: &str, code: Option<&CodeInfo>) -> Function {
    Function {
        name: name.to_string(),
        file: code.map(|c| c.to_path().display().to_string()),
        line: code.and_then(|c| c.line),
    }
}
