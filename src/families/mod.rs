//! The rule families: each is one folder of checks with its own tracked state. Their catalogue is
//! `sharecheck_core::rules::<family>`; where their checks run is `sharecheck_core::check_table!`.
//!
//! Adding a family: a folder here (its checks in `checks`, its state implementing
//! `engine::state::FamilyState`, registered in `engine::state::States`), a catalogue file in
//! `core/src/rules/`, and rows in the table.

pub mod attach;
pub mod endpoint;
pub mod ipc;
pub mod lifecycle;
pub mod peer;
