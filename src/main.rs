//! The `silverline` binary: parse the command line, start logging, run, and
//! turn the outcome into the exit code DESIGN.md promises.

use std::io::Write;

use clap::Parser;

fn main() {
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
