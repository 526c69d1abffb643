//! The `silverline` binary: parse the command line, start logging, run, and
//! turn the outcome into the exit code DESIGN.md promises.

use std::io::Write;

use clap::Parser;

fn main() {
    tune_malloc();
    let cli = silverline::cli::Cli::parse();
    silverline::telemetry::init(cli.log_format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            std::process::exit(3);
        }
    };
    let code = match runtime.block_on(silverline::cli::run(cli)) {
        Ok(code) => i32::from(code),
        Err(error) => {
            tracing::error!(error = %error, "run failed");
            eprintln!(
                "error: {}",
                silverline::error::printable_lines(&error.to_string())
            );
            i32::from(error.class().exit_code())
        }
    };
    // Everything the run promised is written and awaited by now: exit
    // without waiting for the runtime's idle threads to wind down.
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

/// The allocator's settings silverline runs best with (docs/performance.md),
/// each unless its environment variable or `GLIBC_TUNABLES` entry sets it:
///
/// - one arena: glibc gives each thread that allocates its own arena, and
///   memory freed in one (the committed periods measured in the background,
///   say) is not reused by another: a 1M-account run peaked about 130 MiB
///   higher for it, and one arena ran as fast;
/// - blocks up to 256 MiB from the heap, and up to 128 MiB of free heap kept
///   rather than handed back: by default glibc maps each block of a few MiB
///   or more (a column of a million rows, a hash table) afresh and unmaps it
///   when freed, and runs spent a third of their system time faulting those
///   pages in.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune_malloc() {
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    let unset = malloc_settings_unset(|name| std::env::var_os(name).is_some(), &tunables);
    for setting in unset {
        // SAFETY: mallopt only sets a tunable of the allocator; it is
        // called before any other thread exists.
        unsafe {
            libc::mallopt(setting.param, setting.value);
        }
    }
}

/// Other allocators keep their defaults.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_malloc() {}

/// One of glibc's allocator settings.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[derive(Debug, Clone, Copy, PartialEq)]
struct MallocSetting {
    /// The environment variable that sets it.
    variable: &'static str,
    /// Its name in `GLIBC_TUNABLES` (`glibc.malloc.<name>`).
    tunable: &'static str,
    param: libc::c_int,
    value: libc::c_int,
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MALLOC_SETTINGS: [MallocSetting; 3] = [
    MallocSetting {
        variable: "MALLOC_ARENA_MAX",
        tunable: "arena_max",
        param: libc::M_ARENA_MAX,
        value: 1,
    },
    MallocSetting {
        variable: "MALLOC_MMAP_THRESHOLD_",
        tunable: "mmap_threshold",
        param: libc::M_MMAP_THRESHOLD,
        value: 256 << 20,
    },
    MallocSetting {
        variable: "MALLOC_TRIM_THRESHOLD_",
        tunable: "trim_threshold",
        param: libc::M_TRIM_THRESHOLD,
        value: 128 << 20,
    },
];

/// The settings neither an environment variable (`is_set`) nor
/// `tunables` (the value of `GLIBC_TUNABLES`) gives.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn malloc_settings_unset(is_set: impl Fn(&str) -> bool, tunables: &str) -> Vec<MallocSetting> {
    MALLOC_SETTINGS
        .into_iter()
        .filter(|s| {
            !is_set(s.variable) && !tunables.contains(&format!("glibc.malloc.{}", s.tunable))
        })
        .collect()
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    #[test]
    fn an_allocator_setting_the_environment_gives_is_left_to_it() {
        let names = |settings: Vec<MallocSetting>| -> Vec<&str> {
            settings.iter().map(|s| s.tunable).collect()
        };
        let all = names(malloc_settings_unset(|_| false, ""));
        assert_eq!(all, ["arena_max", "mmap_threshold", "trim_threshold"]);
        let by_variable = malloc_settings_unset(|v| v == "MALLOC_ARENA_MAX", "");
        assert_eq!(names(by_variable), ["mmap_threshold", "trim_threshold"]);
        let tunables = "glibc.malloc.trim_threshold=1:glibc.malloc.mmap_threshold=2";
        assert_eq!(
            names(malloc_settings_unset(|_| false, tunables)),
            ["arena_max"]
        );
    }
}
