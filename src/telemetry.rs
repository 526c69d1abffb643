//! Logging: `tracing` to stderr, JSON by default (for orchestrators), text on
//! request (for laptops). Logs narrate; the run summary is the record.
//!
//! Every log line is written through [`LineWriter`], which escapes control
//! characters: a user-supplied id or value echoed into a message cannot
//! break a line in two or send escape sequences to a terminal.

use std::io::Write;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

use crate::error::printable;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line.
    Json,
    /// Human-readable lines.
    Text,
}

/// Installs the global subscriber; `RUST_LOG` overrides the default `info` level.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(|| LineWriter(std::io::stderr()));
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Text => builder.with_target(false).try_init(),
    };
}

/// Writes each formatted log event as one line, its control characters
/// escaped (the final line end kept).
pub struct LineWriter<W: Write>(pub W);

impl<W: Write> Write for LineWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(buf);
        let (body, end) = match text.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (text.as_ref(), ""),
        };
        self.0
            .write_all(format!("{}{end}", printable(body)).as_bytes())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_line_carries_no_raw_control_character() {
        let mut writer = LineWriter(Vec::new());
        writer
            .write_all(b"ERROR invalid --contributor 'A\x1b[31mB\nFAKE line'\n")
            .expect("written");
        let text = String::from_utf8(writer.0).expect("utf-8");
        assert_eq!(
            text,
            "ERROR invalid --contributor 'A\\u{1b}[31mB\\nFAKE line'\n"
        );
    }
}
