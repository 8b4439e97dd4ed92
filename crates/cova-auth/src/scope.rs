use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Declares every scope once: its variant, its name in the API and what it gives access to.
macro_rules! scopes {
    ($( $variant:ident => ($name:literal, $access:literal) ),* $(,)?) => {
        /// The five scopes of the interface specification.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Scope { $( $variant ),* }

        impl Scope {
            pub const ALL: [Scope; [$( Scope::$variant ),*].len()] = [$( Scope::$variant ),*];

            pub const fn as_str(self) -> &'static str {
                match self { $( Scope::$variant => $name ),* }
            }

            /// What the scope gives access to, as the workspace shows it.
            pub const fn access(self) -> &'static str {
                match self { $( Scope::$variant => $access ),* }
            }
        }
    };
}

scopes! {
    MetadataRead => ("metadata:read", "Post metadata"),
    AnalyzeWrite => ("analyze:write", "Comment collection jobs"),
    LibraryWrite => ("library:write", "Library: save, watch, refresh, export"),
    AiWrite => ("ai:write", "AI analyses and watch phrases"),
    KeywordsWrite => ("keywords:write", "Keywords, channels and alerts"),
}

impl Scope {
    const fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Scope {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Scope {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// A name that is no scope; says which are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownScope(pub String);

impl fmt::Display for UnknownScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Scope::ALL.iter().map(|s| s.as_str()).collect();
        write!(f, "unknown scope `{}`; valid scopes: {}", self.0, names.join(", "))
    }
}

impl std::error::Error for UnknownScope {}

impl FromStr for Scope {
    type Err = UnknownScope;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::ALL.into_iter().find(|scope| scope.as_str() == s.trim()).ok_or_else(|| UnknownScope(s.trim().to_owned()))
    }
}

/// A set of scopes; stored as a comma-separated list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ScopeSet(u8);

impl ScopeSet {
    /// Every scope: what a cookie session may do.
    pub fn all() -> Self {
        let mut set = ScopeSet::default();
        Scope::ALL.into_iter().for_each(|s| set.insert(s));
        set
    }

    pub fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    pub fn insert(&mut self, scope: Scope) {
        self.0 |= scope.bit();
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.contains(*s))
    }

    /// Parses `a,b,c`; empty items are ignored, unknown ones refused.
    pub fn parse_list(list: &str) -> Result<Self, UnknownScope> {
        let mut set = ScopeSet::default();
        for item in list.split(',').filter(|s| !s.trim().is_empty()) {
            set.insert(item.parse()?);
        }
        Ok(set)
    }

    pub fn to_list(self) -> String {
        self.iter().map(Scope::as_str).collect::<Vec<_>>().join(",")
    }
}

impl FromIterator<Scope> for ScopeSet {
    fn from_iter<T: IntoIterator<Item = Scope>>(iter: T) -> Self {
        let mut set = ScopeSet::default();
        for s in iter {
            set.insert(s);
        }
        set
    }
}

impl Serialize for ScopeSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_round_trip() {
        let set = ScopeSet::parse_list("analyze:write, metadata:read").expect("valid list");
        assert!(set.contains(Scope::AnalyzeWrite));
        assert!(set.contains(Scope::MetadataRead));
        assert!(!set.contains(Scope::AiWrite));
        assert_eq!(set.to_list(), "metadata:read,analyze:write");
        assert_eq!(ScopeSet::parse_list(&set.to_list()), Ok(set));
    }

    #[test]
    fn unknown_scope_is_refused() {
        let err = ScopeSet::parse_list("metadata:read,admin").expect_err("admin is no scope");
        assert_eq!(err.0, "admin");
    }
}
