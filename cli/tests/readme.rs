//! docs/configuration.md's options table is what the options table of `sharecheck_core::options` generates
//! (as RULES.md is the output of `sharecheck rules`).

use std::path::Path;

use sharecheck_core::options::{self, readme_table};
use sharecheck_core::schema::env;

/// Set to 1 to rewrite docs/configuration.md's generated section instead of comparing.
const UPDATE_ENV: &str = env::dev::UPDATE_README;
const BEGIN: &str = "<!-- options table: generated from core/src/options.rs, do not edit -->\n";
const END: &str = "<!-- end of options table -->\n";

#[test]
fn the_documented_options_table_is_generated_from_the_options_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("docs")
        .join("configuration.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let (Some(begin), Some(end)) = (readme.find(BEGIN), readme.find(END)) else {
        panic!(
            "{} lacks the markers {BEGIN:?} and {END:?} around the options table",
            path.display()
        );
    };
    let start = begin + BEGIN.len();
    assert!(start <= end, "the end marker comes before the start marker");
    let want = readme_table();
    if std::env::var_os(UPDATE_ENV).is_some_and(|v| v == "1") {
        let updated = format!("{}{want}{}", &readme[..start], &readme[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        readme[start..end] == want,
        "docs/configuration.md's options table is stale: run {UPDATE_ENV}=1 cargo test -p sharecheck-cli \
         --test readme\n--- docs/configuration.md\n{}--- generated\n{want}",
        &readme[start..end]
    );
    // Every key has its row.
    for o in options::TABLE {
        assert!(want.contains(&format!("`{}=", o.key)), "{}", o.key);
    }
}
