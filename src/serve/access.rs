//! Who may use the workbench, and for what: grants read from an access file
//! (or the `SILVERLINE_SERVE_ACCESS` environment variable), matched against a
//! bearer token (by its SHA-256) or a trusted reverse proxy's identity headers
//! (oauth2-proxy's `X-Forwarded-User`, `X-Forwarded-Email`,
//! `X-Forwarded-Groups`, believed only from the configured proxy addresses).
//!
//! A grant gives a role ([`Role::Viewer`] sees, [`Role::Operator`] also acts)
//! and optionally the `pii` permission (sensitive columns unmasked), for every
//! contributor or only those listed. A person may hold several grants (a
//! token, or a user and their groups): each permission is checked per
//! contributor against all of them.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::Path;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// The environment variable that may hold the access file's text.
pub const ACCESS_ENV: &str = "SILVERLINE_SERVE_ACCESS";

/// The header naming the user, set by a trusted proxy.
pub const USER_HEADER: &str = "x-forwarded-user";
/// The header naming the user's email, set by a trusted proxy.
pub const EMAIL_HEADER: &str = "x-forwarded-email";
/// The header listing the user's groups (comma-separated), set by a trusted proxy.
pub const GROUPS_HEADER: &str = "x-forwarded-groups";

/// What a grant lets its holder do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Sees exceptions, their rows (masked without `pii`) and the backlog.
    Viewer,
    /// Also acts: ignore, correct, accept as is, replay.
    Operator,
}

/// One thing a person may want to do with a contributor's exceptions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// See them.
    View,
    /// Act on them.
    Act,
    /// See their sensitive columns unmasked.
    SeePii,
}

/// The contributors a grant covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every contributor.
    Every,
    /// Only these.
    Only(BTreeSet<String>),
}

impl Scope {
    fn covers(&self, contributor: &str) -> bool {
        match self {
            Scope::Every => true,
            Scope::Only(listed) => listed.contains(contributor),
        }
    }
}

/// A role and the `pii` permission over some contributors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// What the holder may do.
    pub role: Role,
    /// Whether the holder sees sensitive columns unmasked.
    pub pii: bool,
    /// Which contributors.
    pub scope: Scope,
}

impl Grant {
    /// Everything, everywhere: the grant of `--insecure-local`.
    pub fn everything() -> Grant {
        Grant {
            role: Role::Operator,
            pii: true,
            scope: Scope::Every,
        }
    }

    fn allows(&self, permission: Permission, contributor: &str) -> bool {
        let granted = match permission {
            Permission::View => true,
            Permission::Act => self.role == Role::Operator,
            Permission::SeePii => self.pii,
        };
        granted && self.scope.covers(contributor)
    }
}

/// A person the workbench recognised, with every grant they hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Who they are: recorded as the actor of what they do.
    pub name: String,
    /// What they may do.
    pub grants: Vec<Grant>,
}

impl Principal {
    /// Whether they may do `permission` for `contributor`.
    pub fn may(&self, permission: Permission, contributor: &str) -> bool {
        self.grants
            .iter()
            .any(|grant| grant.allows(permission, contributor))
    }

    /// Whether they may act for at least one contributor.
    pub fn may_act_anywhere(&self) -> bool {
        self.grants.iter().any(|g| g.role == Role::Operator)
    }

    /// Their highest role, for the page header.
    pub fn role(&self) -> Role {
        self.grants
            .iter()
            .map(|g| g.role)
            .max()
            .unwrap_or(Role::Viewer)
    }
}

/// Who a grant is for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Holder {
    /// A bearer token, by its SHA-256 (lowercase hex), named for the audit trail.
    Token { sha256: String, name: String },
    /// A proxy user, by `X-Forwarded-User` or `X-Forwarded-Email`.
    User(String),
    /// A proxy group, in `X-Forwarded-Groups`.
    Group(String),
}

/// The validated access file: grants and the proxies whose headers are believed.
#[derive(Debug, Clone, Default)]
pub struct Access {
    grants: Vec<(Holder, Grant)>,
    trusted_proxies: BTreeSet<IpAddr>,
}

/// The access file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AccessFile {
    /// Addresses of the reverse proxies whose identity headers are believed (default: none).
    #[serde(default)]
    trusted_proxies: Vec<String>,
    /// The grants.
    #[serde(default)]
    grant: Vec<GrantEntry>,
}

/// One `[[grant]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantEntry {
    /// SHA-256 (hex) of a bearer token.
    token_sha256: Option<String>,
    /// A proxy user (`X-Forwarded-User` or `X-Forwarded-Email`).
    user: Option<String>,
    /// A proxy group (`X-Forwarded-Groups`).
    group: Option<String>,
    /// The actor recorded for a token's actions (required with `token_sha256`).
    name: Option<String>,
    /// `viewer` or `operator`.
    role: Role,
    /// Sensitive columns unmasked (default false).
    #[serde(default)]
    pii: bool,
    /// Contributors covered (default: every one; `*` means every one too).
    contributors: Option<Vec<String>>,
}

/// The SHA-256 of a token, as lowercase hex (how the access file holds it).
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

impl Access {
    /// Reads the access file `path`, or, without one, the text of
    /// [`ACCESS_ENV`]; None when neither is given.
    pub fn load(path: Option<&Path>, env_text: Option<String>) -> Result<Option<Access>> {
        let (text, origin) = match (path, env_text) {
            (Some(path), _) => {
                let text = std::fs::read_to_string(path).map_err(|source| Error::ConfigRead {
                    path: path.to_path_buf(),
                    source,
                })?;
                (text, path.display().to_string())
            }
            (None, Some(text)) if !text.trim().is_empty() => (text, ACCESS_ENV.to_string()),
            _ => return Ok(None),
        };
        Access::parse(&text, &origin).map(Some)
    }

    /// Parses the access file's text; `origin` names it in errors. Every
    /// problem is listed at once.
    pub fn parse(text: &str, origin: &str) -> Result<Access> {
        let invalid = |problems: Vec<String>| Error::ConfigInvalid {
            path: origin.into(),
            problems,
        };
        let file: AccessFile = toml::from_str(text).map_err(|e| invalid(vec![e.to_string()]))?;
        let mut problems = Vec::new();
        let mut trusted_proxies = BTreeSet::new();
        for address in &file.trusted_proxies {
            match address.parse::<IpAddr>() {
                Ok(ip) => {
                    trusted_proxies.insert(ip.to_canonical());
                }
                Err(_) => {
                    problems.push(format!("trusted_proxies: '{address}' is not an IP address"))
                }
            }
        }
        let mut grants = Vec::new();
        for (index, entry) in file.grant.into_iter().enumerate() {
            match grant_of(entry) {
                Ok(grant) => grants.push(grant),
                Err(problem) => problems.push(format!("grant {}: {problem}", index + 1)),
            }
        }
        if !problems.is_empty() {
            return Err(invalid(problems));
        }
        Ok(Access {
            grants,
            trusted_proxies,
        })
    }

    /// The holder of `token`, if a grant names its hash.
    pub fn by_token(&self, token: &str) -> Option<Principal> {
        let hash = token_hash(token);
        let mut name = None;
        let grants: Vec<Grant> = self
            .grants
            .iter()
            .filter_map(|(holder, grant)| match holder {
                Holder::Token { sha256, name: who } if same(sha256, &hash) => {
                    name.get_or_insert_with(|| who.clone());
                    Some(grant.clone())
                }
                _ => None,
            })
            .collect();
        Some(Principal {
            name: name?,
            grants,
        })
    }

    /// Whether identity headers from `peer` are believed.
    /// (An IPv4 peer of a dual-stack listener, `::ffff:a.b.c.d`, is its IPv4 address.)
    pub fn trusts(&self, peer: IpAddr) -> bool {
        self.trusted_proxies.contains(&peer.to_canonical())
    }

    /// The person a trusted proxy names: their user and email grants and
    /// those of their groups; None when no grant matches.
    pub fn by_proxy(
        &self,
        user: Option<&str>,
        email: Option<&str>,
        groups: &[&str],
    ) -> Option<Principal> {
        let name = email.or(user)?.to_string();
        let grants: Vec<Grant> = self
            .grants
            .iter()
            .filter(|(holder, _)| match holder {
                Holder::User(u) => Some(u.as_str()) == user || Some(u.as_str()) == email,
                Holder::Group(g) => groups.contains(&g.as_str()),
                Holder::Token { .. } => false,
            })
            .map(|(_, grant)| grant.clone())
            .collect();
        (!grants.is_empty()).then_some(Principal { name, grants })
    }
}

/// Compares two hashes in time independent of where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn grant_of(entry: GrantEntry) -> std::result::Result<(Holder, Grant), String> {
    let holder = match (entry.token_sha256, entry.user, entry.group) {
        (Some(hash), None, None) => {
            let hash = hash.trim().to_ascii_lowercase();
            if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(
                    "token_sha256 must be 64 hex digits (sha256sum of the token)".to_string(),
                );
            }
            let name = entry
                .name
                .filter(|n| !n.trim().is_empty())
                .ok_or("a token grant needs a name (recorded as the actor of its actions)")?;
            Holder::Token { sha256: hash, name }
        }
        (None, Some(user), None) if !user.trim().is_empty() => Holder::User(user),
        (None, None, Some(group)) if !group.trim().is_empty() => Holder::Group(group),
        (None, Some(_), None) | (None, None, Some(_)) => {
            return Err("a user or group grant needs a non-empty name".to_string());
        }
        _ => return Err("name exactly one of token_sha256, user or group".to_string()),
    };
    let scope = match entry.contributors {
        None => Scope::Every,
        Some(list) if list.iter().any(|c| c == "*") => Scope::Every,
        Some(list) if list.is_empty() => {
            return Err(
                "contributors is empty: list some, or leave it out for every one".to_string(),
            );
        }
        Some(list) => Scope::Only(list.into_iter().collect()),
    };
    Ok((
        holder,
        Grant {
            role: entry.role,
            pii: entry.pii,
            scope,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
trusted_proxies = ["127.0.0.1"]

[[grant]]
token_sha256 = "TOKEN_HASH"
name = "ops"
role = "operator"
contributors = ["BANK_A"]

[[grant]]
user = "ann@example.com"
role = "viewer"
pii = true

[[grant]]
group = "dq-operators"
role = "operator"
contributors = ["BNPL_7"]
"#;

    fn access() -> Access {
        Access::parse(
            &FILE.replace("TOKEN_HASH", &token_hash("s3cret")),
            "access.toml",
        )
        .unwrap()
    }

    #[test]
    fn a_token_is_known_by_its_hash_and_scoped() {
        let access = access();
        let ops = access.by_token("s3cret").unwrap();
        assert_eq!(ops.name, "ops");
        assert!(ops.may(Permission::Act, "BANK_A"));
        assert!(!ops.may(Permission::View, "BNPL_7"));
        assert!(!ops.may(Permission::SeePii, "BANK_A"));
        assert_eq!(access.by_token("wrong"), None);
    }

    #[test]
    fn a_proxy_user_holds_their_grants_and_their_groups() {
        let access = access();
        let ann = access
            .by_proxy(Some("ann"), Some("ann@example.com"), &["dq-operators"])
            .unwrap();
        assert_eq!(ann.name, "ann@example.com");
        assert!(ann.may(Permission::SeePii, "BANK_A"));
        assert!(!ann.may(Permission::Act, "BANK_A"));
        assert!(ann.may(Permission::Act, "BNPL_7"));
        assert_eq!(access.by_proxy(Some("bob"), None, &[]), None);
        assert!(access.trusts("127.0.0.1".parse().unwrap()));
        assert!(!access.trusts("10.0.0.1".parse().unwrap()));
        // An IPv4 proxy reaching a dual-stack listener.
        assert!(access.trusts("::ffff:127.0.0.1".parse().unwrap()));
    }

    #[test]
    fn a_grant_to_an_empty_user_or_group_is_refused() {
        for holder in ["user = \"\"", "group = \" \""] {
            let text = format!("[[grant]]\n{holder}\nrole = \"viewer\"\n");
            let refused = Access::parse(&text, "access.toml").unwrap_err().to_string();
            assert!(refused.contains("non-empty name"), "{refused}");
        }
    }

    #[test]
    fn a_bad_file_lists_every_problem() {
        let text = r#"
trusted_proxies = ["not-an-ip"]
[[grant]]
token_sha256 = "abc"
name = "x"
role = "viewer"
[[grant]]
user = "u"
group = "g"
role = "operator"
[[grant]]
token_sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
role = "viewer"
"#;
        let error = Access::parse(text, "access.toml").unwrap_err().to_string();
        for expected in [
            "not-an-ip",
            "grant 1: token_sha256",
            "grant 2: name exactly one",
            "grant 3: a token grant needs a name",
        ] {
            assert!(error.contains(expected), "{expected}: {error}");
        }
        let unknown = Access::parse("[[grant]]\nrole = \"admin\"\nuser = \"u\"", "a.toml");
        assert!(unknown.is_err());
    }
}
