//! The `silverline` binary: parse the command line, start logging, run, and
//! turn the outcome into the exit code DESIGN.md promises.

use std::io::Write;

use clap::Parser;

fn main() {
    one_malloc_arena();
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

/// glibc gives each thread that allocates its own arena, and memory freed
/// in one (the committed periods measured in the background, say) is not
/// reused by another: on the bench (2 cores) a 1M-account run peaked about
/// 130 MiB higher for it, and one arena ran as fast (docs/performance.md).
/// `MALLOC_ARENA_MAX` or a `glibc.malloc.arena_max` tunable, when set, decides.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn one_malloc_arena() {
    let tuned = std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() && !tuned {
        // SAFETY: mallopt only sets a tunable of the allocator; it is called
        // before any other thread exists.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}

/// Other allocators keep their defaults.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn one_malloc_arena() {}
