//! The `[lineage]` settings, validated: where each run's OpenLineage events
//! go — JSON files in a folder, or POSTed to an HTTP endpoint (Marquez, a
//! lineage proxy) with an optional bearer token read from the environment.

use std::path::Path;

use url::Url;

use crate::config::locations::resolve_location;
use crate::config::raw::LineageConfig;

/// Where OpenLineage events go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineageTarget {
    /// A folder URL (`file://...`, `s3://bucket/prefix`): one JSON file per event.
    Folder(String),
    /// An HTTP(S) endpoint that takes one event per POST.
    Http(HttpLineage),
}

/// An OpenLineage HTTP endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpLineage {
    /// The URL each event is POSTed to (no credentials in it).
    pub url: Url,
    /// The environment variable holding the bearer token, if any.
    pub api_key_env: Option<String>,
}

impl LineageTarget {
    /// The target `raw` names (`None` when no location is set or it is
    /// empty), or the problems of its settings, each naming the setting;
    /// a relative folder resolves against `base`.
    pub fn check(
        raw: &LineageConfig,
        base: &Path,
        problems: &mut Vec<String>,
    ) -> Option<LineageTarget> {
        let api_key_env = check_api_key_env(raw.api_key_env.as_deref(), problems);
        let Some(location) = raw
            .location
            .as_deref()
            .map(str::trim)
            .filter(|l| !l.is_empty())
        else {
            if api_key_env.is_some() {
                problems.push("lineage.api_key_env: set, but lineage.location is not".to_string());
            }
            return None;
        };
        let scheme = location.split_once("://").map(|(scheme, _)| scheme);
        match scheme {
            Some("http" | "https") => check_http(location, problems)
                .map(|url| LineageTarget::Http(HttpLineage { url, api_key_env })),
            None | Some("file" | "s3") => {
                if api_key_env.is_some() {
                    problems.push(format!(
                        "lineage.api_key_env: only an http(s) lineage.location sends a token, not '{}'",
                        crate::error::printable(location)
                    ));
                }
                Some(LineageTarget::Folder(resolve_location(location, base)))
            }
            Some(other) => {
                problems.push(format!(
                    "lineage.location: scheme '{}' is not supported (expected a folder path, file://, s3:// or http(s)://)",
                    crate::error::printable(other)
                ));
                None
            }
        }
    }
}

/// `text` as an HTTP endpoint: a host, no credentials (they would show in
/// logs; the problem does not repeat such a URL).
fn check_http(text: &str, problems: &mut Vec<String>) -> Option<Url> {
    let shown = |problem: String| {
        format!(
            "lineage.location: '{}' {problem} (expected e.g. http://marquez:5000/api/v1/lineage)",
            crate::error::printable(text)
        )
    };
    let problem = match Url::parse(text) {
        Err(e) => shown(format!("is not a URL ({e})")),
        Ok(url) if !url.username().is_empty() || url.password().is_some() => {
            "lineage.location: must carry no credentials (name a token with lineage.api_key_env)"
                .to_string()
        }
        Ok(url) if url.host().is_none() => shown("names no host".to_string()),
        Ok(url) => return Some(url),
    };
    problems.push(problem);
    None
}

/// The token's environment variable name: letters, digits and `_`, not
/// starting with a digit.
fn check_api_key_env(name: Option<&str>, problems: &mut Vec<String>) -> Option<String> {
    let name = name?;
    let valid = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.chars().next().is_some_and(|c| !c.is_ascii_digit());
    if !valid {
        problems.push(format!(
            "lineage.api_key_env: '{}' is not an environment variable name (letters, digits and _, e.g. OPENLINEAGE_API_KEY)",
            crate::error::printable(name)
        ));
        return None;
    }
    Some(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        location: Option<&str>,
        api_key_env: Option<&str>,
    ) -> (Option<LineageTarget>, Vec<String>) {
        let raw = LineageConfig {
            location: location.map(str::to_string),
            api_key_env: api_key_env.map(str::to_string),
        };
        let mut problems = Vec::new();
        let target = LineageTarget::check(&raw, Path::new("/etc/silverline"), &mut problems);
        (target, problems)
    }

    #[test]
    fn a_path_is_a_folder_resolved_against_the_config_folder() {
        let (target, problems) = check(Some("lineage"), None);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            target,
            Some(LineageTarget::Folder(
                "file:///etc/silverline/lineage".to_string()
            ))
        );
        let (target, _) = check(Some("s3://bucket/lineage"), None);
        assert_eq!(
            target,
            Some(LineageTarget::Folder("s3://bucket/lineage".to_string()))
        );
    }

    #[test]
    fn an_http_url_is_an_endpoint_with_its_token_variable() {
        let (target, problems) = check(
            Some("http://marquez:5000/api/v1/lineage"),
            Some("OPENLINEAGE_API_KEY"),
        );
        assert!(problems.is_empty(), "{problems:?}");
        let Some(LineageTarget::Http(http)) = target else {
            panic!("not http: {target:?}");
        };
        assert_eq!(http.url.as_str(), "http://marquez:5000/api/v1/lineage");
        assert_eq!(http.api_key_env.as_deref(), Some("OPENLINEAGE_API_KEY"));
    }

    #[test]
    fn no_location_or_an_empty_one_emits_nothing() {
        assert_eq!(check(None, None), (None, Vec::new()));
        assert_eq!(check(Some("  "), None), (None, Vec::new()));
    }

    #[test]
    fn bad_settings_are_named() {
        let (_, problems) = check(Some("gs://bucket/x"), None);
        assert!(
            problems[0].contains("scheme 'gs' is not supported"),
            "{problems:?}"
        );
        let (_, problems) = check(Some("http://user:pw@host/x"), None);
        assert!(problems[0].contains("no credentials"), "{problems:?}");
        assert!(!problems[0].contains("pw"), "{problems:?}");
        let (_, problems) = check(Some("lineage"), Some("TOKEN"));
        assert!(problems[0].contains("only an http(s)"), "{problems:?}");
        let (_, problems) = check(Some("http://host/x"), Some("1BAD-NAME"));
        assert!(
            problems[0].contains("not an environment variable name"),
            "{problems:?}"
        );
        let (_, problems) = check(None, Some("TOKEN"));
        assert!(
            problems[0].contains("lineage.location is not"),
            "{problems:?}"
        );
    }
}
