//! The command line: `run`, `check-config` and `demo`.

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use crate::accept::{AcceptRequest, accept};
use crate::config::load_plan;
use crate::core::drop::DropRef;
use crate::error::Result;
use crate::exceptions::alerts::webhook::{Origin, Payload, notify};
use crate::exceptions::close::{Decision, ignore};
use crate::infra::catalog::{SilverCheck, check_silver, table_ident};
use crate::pipeline::claim::wait_for_drop;
use crate::pipeline::summary::RunStatus;
use crate::pipeline::{RunOptions, RunOutcome, run as run_drop};
use crate::replay::{ReplayOptions, ReplayOutcome, replay};
use crate::report::gather::{Gather, gather};
use crate::report::html::{check_out_dir, write_report};
use crate::report::text::backlog_text;
use crate::telemetry::LogFormat;

/// silverline: judge a contributor's drop against the rules and its own history, then commit it to Silver.
#[derive(Debug, Parser)]
#[command(name = "silverline", version, about)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "json",
        env = "SILVERLINE_LOG_FORMAT"
    )]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one drop: claim, read, baseline, evaluate, route, write, balance, commit, summary.
    Run {
        /// Configuration file.
        #[arg(long, env = "SILVERLINE_CONFIG")]
        config: PathBuf,
        /// Contributor id (the drop's folder under the bronze root).
        #[arg(long)]
        contributor: String,
        /// Drop id (the folder under the contributor).
        #[arg(long = "drop")]
        drop_id: String,
        /// Do everything but the commit, and say what would have been committed.
        #[arg(long)]
        dry_run: bool,
        /// Wait up to this long for a drop not in bronze yet (`90s`, `30m`, `2h`), looking
        /// again every twentieth of it (1 to 30 s); still not there: exit 5.
        #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
        wait_for_drop: Option<std::time::Duration>,
    },
    /// Run a contributor's drops from one drop id to another, in order: skip those
    /// already committed, stop at the first failure and say where to resume.
    Backfill {
        /// Configuration file.
        #[arg(long, env = "SILVERLINE_CONFIG")]
        config: PathBuf,
        /// Contributor id.
        #[arg(long)]
        contributor: String,
        /// First drop id (inclusive; drop ids sort as text, e.g. 2026-01).
        #[arg(long)]
        from: String,
        /// Last drop id (inclusive).
        #[arg(long)]
        to: String,
    },
    /// Run a contributor's open exceptions again: pending rows (reference data caught up)
    /// and, with --include-quarantined, corrected rows put under
    /// <dq_error>/corrections/contributor=<id>/. Rows that now pass are committed.
    Replay {
        /// Configuration file.
        #[arg(long, env = "SILVERLINE_CONFIG")]
        config: PathBuf,
        /// Contributor id.
        #[arg(long)]
        contributor: String,
        /// Also replay quarantined exceptions that have a corrected row.
        #[arg(long)]
        include_quarantined: bool,
    },
    /// Commit the rows a drop's runs set aside, as judged, when what a rule caught is legitimate
    /// (a portfolio sold, say): for one rule or for every rule. Rows set aside by a key
    /// invariant or that did not parse are never accepted. Records who and why.
    Accept {
        /// Configuration file.
        #[arg(long, env = "SILVERLINE_CONFIG")]
        config: PathBuf,
        /// Contributor id.
        #[arg(long)]
        contributor: String,
        /// The drop whose set-aside rows are accepted.
        #[arg(long = "drop")]
        drop_id: String,
        /// Accept only this rule's verdicts (a row set aside by another rule too stays open).
        #[arg(long)]
        rule: Option<String>,
        /// Why the change is legitimate (kept with each exception and in the snapshot).
        #[arg(long)]
        reason: String,
        /// Who accepts it.
        #[arg(long)]
        by: String,
    },
    /// Act on exceptions by hand.
    Exceptions {
        /// What to do.
        #[command(subcommand)]
        command: ExceptionsCommand,
    },
    /// Print the exception backlog: open exceptions by contributor and rule, their age,
    /// entries and exits in the last 7 and 30 days, stale ones, and the open alerts
    /// (`[alerts]`: failure rates creeping up, exceptions ageing, none leaving).
    Backlog {
        /// Configuration file.
        #[arg(long, env = "SILVERLINE_CONFIG")]
        config: PathBuf,
        /// Only this contributor.
        #[arg(long)]
        contributor: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Exit 6 while alerts are open, for a scheduler to page on.
        #[arg(long)]
        check: bool,
        /// Also POST the open alerts to `[alerts.webhook]`.
        #[arg(long, requires = "check")]
        notify: bool,
    },
    /// Write the exception report: a static HTML page (<out>/index.html) with the backlog by
    /// rule and age, entries and exits per week, each run's rejection and warning rates and
    /// the latest runs, for all contributors and for each one.
    Report {
        /// Configuration file.
        #[arg(long, env = "SILVERLINE_CONFIG")]
        config: PathBuf,
        /// Folder to write the report to (created if missing).
        #[arg(long)]
        out: PathBuf,
    },
    /// Expire the snapshots of Silver and of the exception store older than the retention.
    /// What proves a drop committed (the run ledger, in the table's properties) is kept:
    /// a rerun of any committed drop still does nothing.
    Maintain {
        /// Configuration file.
        #[arg(long, env = "SILVERLINE_CONFIG")]
        config: PathBuf,
        /// Expire snapshots older than this many days.
        #[arg(long, default_value_t = 30, env = "SILVERLINE_SNAPSHOT_RETENTION_DAYS")]
        older_than_days: u32,
        /// Keep at least this many of the newest snapshots, whatever their age.
        #[arg(long, default_value_t = 1)]
        retain_last: usize,
    },
    /// Write a starting configuration for a new dataset from a sample file (CSV or Parquet):
    /// <out>/<name>.toml (columns and types from the sample, guessed keys marked REVIEW) and
    /// <out>/rules/<name>_rules.csv. Never overwrites a file.
    Init {
        /// Dataset name (lowercase letters, digits, '_'): names the files and the Silver table.
        #[arg(long)]
        name: String,
        /// A sample of the data: a CSV file with a header, or a Parquet file.
        #[arg(long)]
        sample: PathBuf,
        /// Folder to write into (created if missing).
        #[arg(long, default_value = ".")]
        out: PathBuf,
    },
    /// Validate the configuration and its rules without reading data, and compare the contract
    /// with the Silver table when the catalog can be reached: say what the next run changes in
    /// its schema, and refuse (exit 2) a contract the table cannot evolve to.
    CheckConfig {
        /// Configuration file.
        #[arg(long, env = "SILVERLINE_CONFIG")]
        config: PathBuf,
    },
    /// Preflight before the first schedule: credentials (their source, never the secret),
    /// bronze listable, dq_error writable (a probe object put and deleted), the catalog
    /// answering, Silver's schema against the contract, versioning and default encryption
    /// of the dq_error and warehouse buckets. One line per check; exit 0 when none failed
    /// (warnings allowed), 1 when one did, 2 for a configuration error.
    Doctor {
        /// Configuration file.
        #[arg(long, env = "SILVERLINE_CONFIG")]
        config: PathBuf,
    },
    /// Print the rule set a contributor's runs will use: type, fingerprint, and each rule's
    /// origin, scope, severity and expression.
    Rules {
        /// Configuration file.
        #[arg(long, env = "SILVERLINE_CONFIG")]
        config: PathBuf,
        /// Contributor id.
        #[arg(long)]
        contributor: String,
    },
    /// Benchmark: one monthly run vs the CSV-to-Parquet floor, with 3, 12 and 36 months of
    /// history and with five times the rules. Build with --release first.
    Bench {
        /// Accounts in the monthly drop.
        #[arg(long, default_value_t = 200_000)]
        accounts: usize,
        /// Working folder (removed and re-created).
        #[arg(long, default_value = "silverline-bench")]
        dir: PathBuf,
        /// Larger drops also measured (a dry run each, with 3 months of
        /// history), comma-separated: e.g. 5000000,20000000.
        #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..))]
        large: Vec<u64>,
        /// Monthly drops of `--accounts` a backfill runs in one process,
        /// measured in rows per second (0: not measured).
        #[arg(long, default_value_t = 0)]
        backfill_months: u32,
        /// Measure the backfills alone (of CSV, then Parquet drops), not the single runs.
        #[arg(long)]
        backfill_only: bool,
    },
    /// Serve the workbench: open exceptions, each in full, the backlog, and the actions
    /// (ignore, correct, accept as is, replay) on a web page. Needs an access file (bearer
    /// tokens, or a trusted proxy's identity headers), or --insecure-local on a loopback address.
    Serve {
        /// Configuration file.
        #[arg(long, env = "SILVERLINE_CONFIG")]
        config: PathBuf,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: std::net::SocketAddr,
        /// Access file: grants (role, pii, contributors) for bearer tokens by their SHA-256, and
        /// for proxy users and groups (its text may instead be in SILVERLINE_SERVE_ACCESS).
        #[arg(long, env = "SILVERLINE_SERVE_ACCESS_FILE")]
        access: Option<PathBuf>,
        /// Let anyone on this machine in, as an operator who sees personal data (refused on an
        /// address other than loopback).
        #[arg(long)]
        insecure_local: bool,
    },
    /// Generate the reference dataset, load its history and run the clean month and the corruptions.
    Demo {
        /// Folder for the demo's bronze, warehouse, catalog and dq_error output.
        #[arg(long, default_value = "silverline-demo")]
        dir: PathBuf,
    },
    /// Print the JSON Schema of a document silverline writes (the committed
    /// docs/<document>.schema.json is its output).
    Schema {
        /// The document.
        #[arg(value_enum)]
        document: SchemaDocument,
    },
    /// Register in the catalog the Silver and exception tables it lost (a deleted or replaced
    /// catalog database) from the Iceberg metadata at their locations, history and all. Runs
    /// refuse to create a table over such metadata.
    AdoptTable {
        /// Configuration file.
        #[arg(long, env = "SILVERLINE_CONFIG")]
        config: PathBuf,
        /// The metadata file to register, when commits that raced left several of the newest
        /// version (default: the newest).
        #[arg(long)]
        metadata: Option<String>,
    },
}

/// A document whose JSON Schema `silverline schema` prints.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SchemaDocument {
    /// The run summary (`<dq_error>/summaries/.../run=<run id>.json`).
    Summary,
}

/// `silverline exceptions` subcommands.
#[derive(Debug, Subcommand)]
pub enum ExceptionsCommand {
    /// Close exceptions for good, as ignored, with who and why. An exception already closed is
    /// left as it is; an unknown id is refused (exit 2) and nothing is recorded.
    Ignore {
        /// Configuration file.
        #[arg(long, env = "SILVERLINE_CONFIG")]
        config: PathBuf,
        /// Exception id (the `_exception_id` column of a dq_error file); repeat for several.
        #[arg(long = "id", required = true)]
        ids: Vec<String>,
        /// Why they are ignored.
        #[arg(long)]
        reason: String,
        /// Who ignores them.
        #[arg(long)]
        by: String,
    },
}

pub use crate::error::{EXIT_ALERTS_OPEN, EXIT_COMMITTED_CONCURRENTLY};

/// Executes the parsed command; returns the exit code of a command that did not fail.
pub async fn run(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Run {
            config,
            contributor,
            drop_id,
            dry_run,
            wait_for_drop,
        } => {
            let options = RunOptions {
                dry_run,
                progress: on_terminal(),
                ..RunOptions::default()
            };
            run_one(&config, (&contributor, &drop_id), wait_for_drop, &options).await
        }
        Command::Replay {
            config,
            contributor,
            include_quarantined,
        } => replay_open(&config, &contributor, include_quarantined).await,
        Command::Accept {
            config,
            contributor,
            drop_id,
            rule,
            reason,
            by,
        } => {
            let decision = Decision::new(&by, &reason)?;
            accept_drop(&config, (&contributor, &drop_id), rule, decision).await
        }
        Command::Exceptions {
            command:
                ExceptionsCommand::Ignore {
                    config,
                    ids,
                    reason,
                    by,
                },
        } => ignore_exceptions(&config, &ids, &Decision::new(&by, &reason)?).await,
        Command::Maintain {
            config,
            older_than_days,
            retain_last,
        } => maintain(&config, older_than_days, retain_last).await,
        Command::Backlog {
            config,
            contributor,
            json,
            check,
            notify,
        } => {
            let print = BacklogPrint {
                json,
                check,
                notify,
            };
            backlog(&config, contributor, print).await
        }
        Command::Report { config, out } => report(&config, &out).await,
        Command::Backfill {
            config,
            contributor,
            from,
            to,
        } => backfill(&config, &contributor, (&from, &to)).await,
        Command::CheckConfig { config } => check_config(&config).await,
        Command::Doctor { config } => {
            let diagnosis = crate::doctor::diagnose(&load_plan(&config)?).await;
            println!("{diagnosis}");
            Ok(diagnosis.exit_code())
        }
        Command::Init { name, sample, out } => {
            let starter = crate::config::starter::write_starter(&name, &sample, &out)?;
            println!("{starter}");
            Ok(0)
        }
        Command::Rules {
            config,
            contributor,
        } => {
            print!("{}", describe_rules(&load_plan(&config)?, &contributor)?);
            Ok(0)
        }
        Command::Serve {
            config,
            listen,
            access,
            insecure_local,
        } => {
            let plan = load_plan(&config)?;
            let env_text = std::env::var(crate::serve::access::ACCESS_ENV).ok();
            let options = crate::serve::ServeOptions {
                listen,
                access: crate::serve::access::Access::load(access.as_deref(), env_text)?,
                insecure_local,
            };
            crate::serve::serve(plan, options).await.map(|()| 0)
        }
        Command::Demo { dir } => crate::demo::run_demo(&dir).await.map(|()| 0),
        Command::Bench {
            accounts,
            dir,
            large,
            backfill_months,
            backfill_only,
        } => {
            let sizes = crate::bench::Sizes {
                accounts,
                large: large.into_iter().map(|n| n as usize).collect(),
                backfill_months,
                backfill_only,
            };
            crate::bench::run_bench(&sizes, &dir).await.map(|()| 0)
        }
        Command::Schema {
            document: SchemaDocument::Summary,
        } => {
            print!("{}", crate::pipeline::summary::summary_schema()?);
            Ok(0)
        }
        Command::AdoptTable { config, metadata } => {
            let plan = load_plan(&config)?;
            let adopted = crate::infra::catalog::adopt_tables(&plan, metadata.as_deref()).await?;
            adopted.iter().for_each(|adoption| println!("{adoption}"));
            Ok(0)
        }
    }
}

/// Whether stderr is a terminal (a spinner then names the stage).
fn on_terminal() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
}

/// `silverline run`, after waiting up to `wait` for the drop to arrive.
async fn run_one(
    config: &Path,
    (contributor, drop_id): (&str, &str),
    wait: Option<std::time::Duration>,
    options: &RunOptions,
) -> Result<u8> {
    let plan = load_plan(config)?;
    let drop = DropRef::new(contributor, drop_id)?;
    if let Some(wait) = wait {
        // Not there in time: the run says so (exit 5) and records it.
        wait_for_drop(&plan, &drop, wait).await?;
    }
    let outcome = run_drop(&plan, &drop, options).await?;
    print_outcome(&outcome.summary, outcome.summary_url.as_deref());
    Ok(match outcome.summary.status {
        RunStatus::CommittedConcurrently => EXIT_COMMITTED_CONCURRENTLY,
        _ => 0,
    })
}

/// `silverline replay`.
async fn replay_open(config: &Path, contributor: &str, include_quarantined: bool) -> Result<u8> {
    let plan = load_plan(config)?;
    let options = ReplayOptions {
        include_quarantined,
        run: RunOptions {
            progress: on_terminal(),
            ..RunOptions::default()
        },
    };
    let outcome = replay(&plan, contributor, &options).await?;
    outcome
        .describe(contributor)
        .iter()
        .for_each(|line| println!("{line}"));
    Ok(replay_exit_code(&outcome))
}

/// `silverline accept`.
async fn accept_drop(
    config: &Path,
    (contributor, drop_id): (&str, &str),
    rule: Option<String>,
    decision: Decision,
) -> Result<u8> {
    let plan = load_plan(config)?;
    let request = AcceptRequest {
        drop: DropRef::new(contributor, drop_id)?,
        rule,
        decision,
        only: None,
    };
    let options = RunOptions {
        progress: on_terminal(),
        ..RunOptions::default()
    };
    let outcome = accept(&plan, &request, &options).await?;
    outcome
        .describe(&request)
        .iter()
        .for_each(|line| println!("{line}"));
    Ok(lost_race_exit_code(outcome.run.as_ref()))
}

/// `silverline exceptions ignore`.
async fn ignore_exceptions(config: &Path, ids: &[String], decision: &Decision) -> Result<u8> {
    let plan = load_plan(config)?;
    let outcome = ignore(&plan, ids, decision).await?;
    outcome
        .describe(decision)
        .iter()
        .for_each(|line| println!("{line}"));
    Ok(0)
}

/// `silverline maintain`.
async fn maintain(config: &Path, older_than_days: u32, retain_last: usize) -> Result<u8> {
    let plan = load_plan(config)?;
    let retention = crate::maintain::Retention {
        older_than_days,
        retain_last,
    };
    for table in crate::maintain::maintain(&plan, retention).await? {
        println!(
            "{}: expired {} of {} snapshots (older than {older_than_days} days, newest {retain_last} kept); {} run(s) added to the ledger",
            table.table, table.expired, table.before, table.ledgered
        );
    }
    Ok(0)
}

/// How `silverline backlog` answers.
#[derive(Debug, Clone, Copy)]
struct BacklogPrint {
    /// JSON instead of text.
    json: bool,
    /// Exit 6 while alerts are open.
    check: bool,
    /// POST the open alerts to the webhook.
    notify: bool,
}

/// `silverline backlog`.
async fn backlog(config: &Path, contributor: Option<String>, print: BacklogPrint) -> Result<u8> {
    if let Some(contributor) = &contributor {
        crate::core::drop::check_contributor(contributor)?;
    }
    let plan = load_plan(config)?;
    let what = Gather {
        now: chrono::Utc::now(),
        with_runs: false,
        contributor,
    };
    let data = gather(&plan, what).await?;
    if print.json {
        let text = serde_json::to_string_pretty(&data).map_err(|source| crate::Error::Encode {
            what: "backlog",
            source,
        })?;
        println!("{text}");
    } else {
        print!("{}", backlog_text(&data));
    }
    match (print.notify, &plan.alerts.webhook) {
        (true, Some(webhook)) => {
            let payload = Payload::new(&plan.contract.name, Origin::Check, &data.alerts);
            notify(webhook, &payload).await;
        }
        (true, None) => tracing::warn!("--notify: no [alerts.webhook] is configured, nothing sent"),
        (false, _) => {}
    }
    Ok(match print.check && !data.alerts.is_empty() {
        true => EXIT_ALERTS_OPEN,
        false => 0,
    })
}

/// `silverline report`.
async fn report(config: &Path, out: &Path) -> Result<u8> {
    check_out_dir(out)?;
    let plan = load_plan(config)?;
    let what = Gather {
        now: chrono::Utc::now(),
        with_runs: true,
        contributor: None,
    };
    let data = gather(&plan, what).await?;
    let page = write_report(&data, out)?;
    println!(
        "report: {} ({} contributors, {} runs, {} open exceptions)",
        page.display(),
        data.contributors.len(),
        data.overall.runs.len(),
        data.overall.backlog.open
    );
    Ok(0)
}

/// `silverline backfill`.
async fn backfill(config: &Path, contributor: &str, (from, to): (&str, &str)) -> Result<u8> {
    let plan = load_plan(config)?;
    let options = RunOptions::default();
    let report = crate::backfill::run_backfill(&plan, contributor, from, to, &options).await?;
    for summary in &report.runs {
        print_outcome(summary, None);
    }
    match report.stopped_at {
        None => Ok(0),
        Some((drop_id, error)) => {
            println!(
                "backfill stopped at {contributor}/{drop_id}: {error}\nresume with: silverline backfill --config {} --contributor {contributor} --from {drop_id} --to {to}",
                config.display()
            );
            Err(error)
        }
    }
}

/// `silverline check-config`.
async fn check_config(config: &Path) -> Result<u8> {
    let plan = load_plan(config)?;
    let silver = check_silver(&plan).await?;
    println!(
        "{}: ok ({} columns, {} rules)",
        config.display(),
        plan.contract.columns.len(),
        plan.rules.len()
    );
    let table = table_ident(&plan.table);
    match silver {
        SilverCheck::Unreachable(why) => {
            println!("{table}: not compared with the contract: {why}")
        }
        SilverCheck::Absent => {
            println!("{table}: not created yet: the first run creates it from the contract")
        }
        SilverCheck::Found(None) => println!("{table}: has the contract's schema"),
        SilverCheck::Found(Some(evolution)) => {
            println!("{table}: the next run evolves its schema to the contract's:");
            for change in &evolution.changes {
                println!("  - {change}");
            }
        }
    }
    Ok(0)
}

/// The resolved rule set of `contributor`, as text: each rule as it is evaluated
/// (the valid-row form: a dlt-meta `rows_to_quarantine` expression shows negated).
pub fn describe_rules(plan: &crate::config::Plan, contributor: &str) -> Result<String> {
    crate::core::drop::check_contributor(contributor)?;
    let (contributor_type, rules) = plan.rules_for(contributor)?;
    let mut out = format!(
        "contributor {contributor}: type {contributor_type}, {} rules, fingerprint {}\n",
        rules.len(),
        crate::config::rules::rules_fingerprint(&rules)
    );
    for rule in rules {
        out.push_str(&format!(
            "\n{} [{} / {}{}] from {}\n    passes when {}\n",
            rule.name,
            rule.scope.as_str(),
            rule.severity.as_str(),
            if rule.is_trend() { " / trend" } else { "" },
            rule.origin,
            rule.expression
        ));
        if let Some(filter) = &rule.filter {
            out.push_str(&format!("    only where {filter}\n"));
        }
        if let Some(escalation) = rule.escalation {
            out.push_str(&format!(
                "    acts as {} when more than {:.1}% of checked rows fail\n",
                escalation.to.as_str(),
                escalation.above * 100.0
            ));
        }
    }
    Ok(out)
}

fn print_outcome(summary: &crate::pipeline::summary::Summary, summary_url: Option<&str>) {
    let counts = &summary.counts;
    match summary.status {
        RunStatus::CommittedConcurrently => println!(
            "{}/{}: a concurrent run of the same drop committed it ({}) while this one ran: nothing added",
            summary.contributor,
            summary.drop_id,
            committed_where(summary)
        ),
        RunStatus::AlreadyCommitted => println!(
            "{}/{}: already committed ({}): nothing to do",
            summary.contributor,
            summary.drop_id,
            committed_where(summary)
        ),
        RunStatus::DryRun => println!(
            "dry run: would commit {} rows to {} (received {}, quarantined {}, dropped {}, warned {})",
            counts.committed,
            summary.table,
            counts.received,
            counts.quarantined,
            counts.dropped,
            counts.warned
        ),
        _ => println!(
            "committed {} rows to {} in snapshot {} (received {}, quarantined {}, dropped {}, warned {})",
            counts.committed,
            summary.table,
            summary.snapshot_id.unwrap_or_default(),
            counts.received,
            counts.quarantined,
            counts.dropped,
            counts.warned
        ),
    }
    if let Some(evolution) = &summary.schema_evolution {
        let done = match summary.status {
            RunStatus::DryRun => "would evolve",
            _ => "evolved",
        };
        println!("{done} {}: {evolution}", summary.table);
    }
    let timings = summary.timings_line();
    if !timings.is_empty() {
        println!("timings: {timings}");
    }
    if let Some(url) = summary_url {
        println!("summary: {url}");
    }
}

/// The exit code of a replay: like `run`, 4 when a concurrent replay of the
/// same rows committed them while this one ran (this one resolved nothing).
pub fn replay_exit_code(outcome: &ReplayOutcome) -> u8 {
    lost_race_exit_code(outcome.run.as_ref())
}

/// 4 when a concurrent run of the same drop committed it while `run` ran, else 0.
fn lost_race_exit_code(run: Option<&RunOutcome>) -> u8 {
    let lost = run.is_some_and(|run| run.summary.status == RunStatus::CommittedConcurrently);
    if lost { EXIT_COMMITTED_CONCURRENTLY } else { 0 }
}

/// Where a committed drop is: its snapshot, or its run once the snapshot has expired.
fn committed_where(summary: &crate::pipeline::summary::Summary) -> String {
    match (summary.snapshot_id, &summary.run_id) {
        (Some(id), _) => format!("snapshot {id}"),
        (None, Some(run_id)) => format!("run {run_id}; its snapshot has expired"),
        (None, None) => "its snapshot has expired".to_string(),
    }
}
