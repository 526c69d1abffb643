//! The `silverline` binary: parse the command line, start logging, run, and
//! turn the outcome into the exit code DESIGN.md promises.

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = silverline::cli::Cli::parse();
    silverline::telemetry::init(cli.log_format);
    match silverline::cli::run(cli).await {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            tracing::error!(error = %error, "run failed");
            eprintln!("error: {error}");
            ExitCode::from(error.class().exit_code())
        }
    }
}
