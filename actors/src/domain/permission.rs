//! What an API key may do: `read` (GET), `write` (other methods), `admin` (workspace and key
//! management). `admin` implies `read` and `write`; `write` does not imply `read`.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// One permission.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Permission {
    /// Read resources.
    Read,
    /// Create, change and delete resources.
    Write,
    /// Manage workspaces and API keys.
    Admin,
}

/// A permission string that is not one of `read`, `write`, `admin`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown permission '{0}'; expected one of read, write, admin")]
pub struct UnknownPermission(pub String);

impl Permission {
    /// Every permission, in the order above.
    pub const ALL: [Self; 3] = [Self::Read, Self::Write, Self::Admin];

    /// The permission's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Admin => "admin",
        }
    }
}

impl FromStr for Permission {
    type Err = UnknownPermission;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read" => Ok(Self::Read),
            "write" => Ok(Self::Write),
            "admin" => Ok(Self::Admin),
            other => Err(UnknownPermission(other.to_owned())),
        }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A non-empty set of permissions, kept in a stable order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Permissions(BTreeSet<Permission>);

impl Permissions {
    /// Every permission; what the operator's first key carries.
    pub fn all() -> Self {
        Self([Permission::Read, Permission::Write, Permission::Admin].into())
    }

    /// Whether the set grants `permission`: it holds it, or holds `admin`, which implies
    /// `read` and `write` (an admin key can mint itself any key anyway). `write` does not imply
    /// `read`.
    pub fn contains(&self, permission: Permission) -> bool {
        self.0.contains(&permission) || self.0.contains(&Permission::Admin)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The permission names, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|p| p.as_str()).collect()
    }

    /// The comma-separated form kept in the database.
    pub fn to_storage(&self) -> String {
        self.names().join(",")
    }

    /// Reads the stored form; unknown names (from a newer version) are dropped, which only
    /// ever takes rights away.
    pub fn from_storage(stored: &str) -> Self {
        Self(stored.split(',').filter_map(|p| p.parse().ok()).collect())
    }
}

impl FromIterator<Permission> for Permissions {
    fn from_iter<I: IntoIterator<Item = Permission>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl FromStr for Permissions {
    type Err = UnknownPermission;

    /// Parses a comma-separated list such as `read,write`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::parse)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_round_trip_through_storage_in_a_stable_order() {
        let set: Permissions = "write,read,admin,read".parse().expect("valid");
        assert_eq!(set.to_storage(), "read,write,admin");
        assert_eq!(Permissions::from_storage(&set.to_storage()), set);
    }

    #[test]
    fn an_unknown_permission_is_rejected_by_name() {
        assert_eq!(
            "read,owner".parse::<Permissions>(),
            Err(UnknownPermission("owner".to_owned()))
        );
    }

    #[test]
    fn permission_names_are_case_sensitive() {
        assert!("READ".parse::<Permission>().is_err());
    }

    #[test]
    fn admin_implies_read_and_write_but_write_not_read() {
        let admin = Permissions::from_storage("admin");
        assert!(admin.contains(Permission::Read) && admin.contains(Permission::Write));
        let write = Permissions::from_storage("write");
        assert!(!write.contains(Permission::Read));
    }

    #[test]
    fn an_unknown_stored_permission_grants_nothing() {
        let set = Permissions::from_storage("read,superuser");
        assert_eq!(set.names(), ["read"]);
    }
}
