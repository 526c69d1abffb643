//! The house stays standing: reads every `crate::` and `super::` path of
//! `src/` (outside comments and test modules) and fails when a lower layer
//! uses a higher one, or when two modules (neither inside the other) use each
//! other. The layer order is written here once, and drawn in `src/lib.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level modules, lowest layer first; a module may use its own layer and
/// those below it.
const LAYERS: &[&[&str]] = &[
    &["error", "stage"],
    &["core", "transient", "telemetry", "progress"],
    &["config"],
    &["infra"],
    &["exceptions"],
    &["report"],
    &["pipeline"],
    &["replay", "accept", "backfill", "maintain", "demo", "doctor"],
    &["serve"],
    &["bench"],
    &["cli"],
];

fn layer_of(module: &str) -> usize {
    let top = module.split("::").next().unwrap_or_default();
    LAYERS
        .iter()
        .position(|layer| layer.contains(&top))
        .unwrap_or_else(|| panic!("module {top} is in no layer: add it to LAYERS"))
}

/// Every module of `src/` (as `a::b`) with its source, comments and test modules removed.
fn modules() -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    collect(Path::new("src"), &mut found);
    found
}

fn collect(dir: &Path, found: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, found);
            continue;
        }
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let relative = path.strip_prefix("src").unwrap().with_extension("");
        let mut parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().to_string())
            .collect();
        if parts.last().map(String::as_str) == Some("mod") {
            parts.pop();
        }
        if matches!(parts.as_slice(), [one] if one == "lib" || one == "main") {
            continue;
        }
        found.insert(
            parts.join("::"),
            code_of(&std::fs::read_to_string(&path).unwrap()),
        );
    }
}

/// `text` without comments and without what follows `#[cfg(test)]`.
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths `code` uses, absolute (`a::b::c`), `super::` resolved against `module`.
fn paths_used(module: &str, code: &str) -> Vec<String> {
    let mut used = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start) {
            let begin = from + at;
            from = begin + start.len();
            let preceded =
                begin > 0 && (bytes[begin - 1].is_ascii_alphanumeric() || bytes[begin - 1] == b'_');
            if preceded {
                continue;
            }
            let rest = &code[begin..];
            let path: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let path = path.trim_end_matches(':').to_string();
            let mut absolute = resolve_super(module, &path);
            // `crate::a::{b, c::d}`: each part of the group.
            let after = &rest[path.len()..];
            if let Some(group) = after.strip_prefix("::{") {
                let inner = group.split('}').next().unwrap_or_default();
                for item in inner.split(',') {
                    let item = item
                        .trim()
                        .trim_start_matches('{')
                        .split(" as ")
                        .next()
                        .unwrap_or_default();
                    if !item.is_empty() && item != "self" {
                        used.push(format!("{absolute}::{}", item.trim_end_matches(':')));
                    }
                }
                absolute.clear();
            }
            if !absolute.is_empty() {
                used.push(absolute);
            }
        }
    }
    used
}

fn resolve_super(module: &str, path: &str) -> String {
    let mut base: Vec<&str> = module.split("::").collect();
    let mut rest = path;
    if let Some(stripped) = rest.strip_prefix("crate::") {
        return stripped.to_string();
    }
    // A file module's `super` is its parent module.
    while let Some(stripped) = rest.strip_prefix("super::") {
        base.pop();
        rest = stripped;
    }
    if rest == "super" {
        base.pop();
        rest = "";
    }
    let mut parts: Vec<&str> = base;
    parts.extend(rest.split("::").filter(|p| !p.is_empty()));
    parts.join("::")
}

/// The longest module `path` names.
fn module_of(path: &str, modules: &BTreeMap<String, String>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|candidate| modules.contains_key(candidate))
}

/// Module -> the other modules it uses.
fn uses() -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules();
    modules
        .iter()
        .map(|(module, code)| {
            let targets = paths_used(module, code)
                .iter()
                .filter_map(|p| module_of(p, &modules))
                .filter(|target| target != module)
                .collect();
            (module.clone(), targets)
        })
        .collect()
}

fn inside(inner: &str, outer: &str) -> bool {
    inner.starts_with(&format!("{outer}::"))
}

#[test]
fn no_lower_layer_uses_a_higher_one() {
    let mut wrong = Vec::new();
    for (module, targets) in uses() {
        for target in targets {
            if layer_of(&target) > layer_of(&module) {
                wrong.push(format!("{module} uses {target}"));
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
}

#[test]
fn no_two_modules_use_each_other() {
    let uses = uses();
    let mut loops = Vec::new();
    for (module, targets) in &uses {
        for target in targets {
            let back = uses.get(target).is_some_and(|t| t.contains(module));
            let nested = inside(module, target) || inside(target, module);
            if back && !nested && module < target {
                loops.push(format!("{module} <-> {target}"));
            }
        }
    }
    assert!(loops.is_empty(), "import loops:\n{}", loops.join("\n"));
}

#[test]
fn the_checker_sees_what_it_must() {
    let code = "use crate::infra::storage::Location;\nuse super::{claim::DropRef, route};\n// use crate::cli::run;\nlet x = crate::pipeline::run(a);";
    let used = paths_used("pipeline::write", &code_of(code));
    assert!(
        used.contains(&"infra::storage::Location".to_string()),
        "{used:?}"
    );
    assert!(
        used.contains(&"pipeline::claim::DropRef".to_string()),
        "{used:?}"
    );
    assert!(used.contains(&"pipeline::route".to_string()), "{used:?}");
    assert!(used.contains(&"pipeline::run".to_string()), "{used:?}");
    assert!(
        !used.iter().any(|u| u.starts_with("cli")),
        "comments are skipped: {used:?}"
    );
    assert!(layer_of("cli") > layer_of("pipeline::claim"));
}

/// The source layout in `docs/internals.md` names every module of `src/`:
/// each top-level file or folder has its line (`src/<name>`), and that line
/// names each module inside the folder (`name` or `name.rs`, `name/` for a
/// folder; `mod.rs` is the folder itself).
#[test]
fn the_documented_source_layout_names_every_module() {
    let doc = std::fs::read_to_string("docs/internals.md").unwrap();
    let line_of = |name: &str| -> Option<&str> {
        let prefix = format!("src/{name}");
        doc.lines().find(|l| {
            l.strip_prefix(&prefix)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('/'))
        })
    };
    let mut unnamed = Vec::new();
    for entry in std::fs::read_dir("src").unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let Some(line) = line_of(&name) else {
            unnamed.push(format!("src/{name}"));
            continue;
        };
        if !path.is_dir() {
            continue;
        }
        for inner in std::fs::read_dir(&path).unwrap() {
            let inner = inner.unwrap().path();
            let module = inner.file_stem().unwrap().to_str().unwrap();
            let named = line
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|word| word == module);
            if module != "mod" && !named {
                unnamed.push(format!("src/{name}/{module}"));
            }
        }
    }
    unnamed.sort();
    assert!(
        unnamed.is_empty(),
        "docs/internals.md does not name: {unnamed:?}"
    );
}
