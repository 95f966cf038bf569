//! What one caller may see and change: every account (the CLI, MCP over stdio, the home's
//! own HTTP token), or the accounts of a scoped token (`mailbroker token create`).
//!
//! Invariant: a scoped caller learns nothing of another account's messages, changes or
//! staged deletions. A search is narrowed to its accounts before it runs (so `account:` and
//! `in:anywhere` cannot widen it), and an id or change of another account is answered as
//! one that does not exist (`not_found`, the same words), never with its content.

use std::collections::BTreeSet;

use mailbroker_core::{AccountId, Error, Result};

use mailbroker_query::{Expr, Query, Term};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every account; writes as the surface allows them.
    Owner,
    /// The accounts of one scoped token.
    Accounts {
        accounts: BTreeSet<AccountId>,
        allow_writes: bool,
    },
}

impl Scope {
    /// Whether this caller sees `account`.
    pub fn opens(&self, account: &AccountId) -> bool {
        match self {
            Scope::Owner => true,
            Scope::Accounts { accounts, .. } => accounts.contains(account),
        }
    }

    /// Whether this caller may change mail at all (the surface may still refuse).
    pub fn may_write(&self) -> bool {
        match self {
            Scope::Owner => true,
            Scope::Accounts { allow_writes, .. } => *allow_writes,
        }
    }

    /// `query`, narrowed to this caller's accounts.
    pub fn narrow(&self, query: Query) -> Query {
        let Scope::Accounts { accounts, .. } = self else {
            return query;
        };
        let only = accounts
            .iter()
            .map(|a| Expr::Term(Term::Account(a.as_str().to_string())))
            .collect();
        Query {
            root: Expr::all(vec![query.root, Expr::Or(only)]),
        }
    }

    /// Whether this caller sees every one of `accounts`: the owner always; a scoped caller
    /// when there is at least one and each is its own.
    pub fn sees_all<'a>(&self, accounts: impl IntoIterator<Item = &'a AccountId>) -> bool {
        let Scope::Accounts { accounts: own, .. } = self else {
            return true;
        };
        let mut accounts = accounts.into_iter().peekable();
        accounts.peek().is_some() && accounts.all(|a| own.contains(a))
    }

    /// `Ok` when this caller sees every one of `accounts` (`sees_all`); else what is answered
    /// for a thing that does not exist (`missing`).
    pub fn check_all<'a>(
        &self,
        accounts: impl IntoIterator<Item = &'a AccountId>,
        missing: impl FnOnce() -> Error,
    ) -> Result<()> {
        match self.sees_all(accounts) {
            true => Ok(()),
            false => Err(missing()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scoped_caller_opens_its_accounts_only() {
        let (work, home) = ("work".parse().unwrap(), "home".parse().unwrap());
        let scope = Scope::Accounts {
            accounts: [work].into_iter().collect(),
            allow_writes: false,
        };
        let work: AccountId = "work".parse().unwrap();
        assert!(scope.opens(&work) && !scope.opens(&home));
        assert!(!scope.may_write() && Scope::Owner.may_write());
        let gone = || Error::not_found("x");
        assert!(scope.check_all([&work], gone).is_ok());
        assert!(
            scope
                .check_all([&work, &home], gone)
                .unwrap_err()
                .is_not_found()
        );
        assert!(scope.check_all([], gone).is_err());
        assert!(Scope::Owner.check_all([], gone).is_ok());
        let narrowed =
            scope.narrow(mailbroker_query::parse("in:anywhere account:home", 0).unwrap());
        let mut seen = Vec::new();
        narrowed.root.for_each_term(&mut |t| seen.push(t.clone()));
        assert!(seen.contains(&Term::Account("work".into())));
    }
}
