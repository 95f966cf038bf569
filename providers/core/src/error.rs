//! The one error type of mailbroker. Its variants map 1:1 to the `error_type` strings of the
//! product contract (SPEC §10), so the CLI, the MCP server and the logs all say the same thing.

use std::fmt;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, with a human sentence and (where one exists) the next step for the user.
///
/// Messages are lowercase and name the operation ("uid fetch timed out"). They never contain a
/// secret: adapters build them from protocol verbs and server text, never from credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    Validation(Detail),
    NotFound(Detail),
    Unsupported(Detail),
    AuthRequired(Detail),
    InsufficientScope(Detail),
    RateLimited(Detail),
    ProviderUnavailable(Detail),
    ProviderWriteFailed(Detail),
    OutcomeUnknown(Detail),
    VerificationFailed(Detail),
    StaleState(Detail),
    ConfirmationRequired(Detail),
    ConfirmationDeclined(Detail),
    LimitExceeded(Detail),
    WritesDisabled(Detail),
    Internal(Detail),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detail {
    pub message: String,
    pub next_step: Option<String>,
}

/// An error's SPEC §10 fields, as every surface reports them: `error`, `error_type`, and
/// `next_step` (null when there is none).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ErrorFields {
    pub error: String,
    pub error_type: &'static str,
    pub next_step: Option<String>,
}

impl From<&Error> for ErrorFields {
    fn from(e: &Error) -> ErrorFields {
        ErrorFields {
            error: e.message().to_string(),
            error_type: e.error_type(),
            next_step: e.next_step().map(str::to_string),
        }
    }
}

macro_rules! constructors {
    ($($fn_name:ident => $variant:ident, $type_str:literal, $exit:literal;)*) => {
        impl Error {
            $(
                pub fn $fn_name(message: impl Into<String>) -> Self {
                    Error::$variant(Detail { message: message.into(), next_step: None })
                }
            )*

            /// Every SPEC §10 string, in the order of the variants.
            pub const TYPES: &'static [&'static str] = &[$($type_str),*];

            /// The SPEC §10 string for this error.
            pub fn error_type(&self) -> &'static str {
                match self { $(Error::$variant(_) => $type_str,)* }
            }

            /// The process exit code the CLI uses for this error; grouped by what the user does
            /// next (fix input 2, fix the account 3, retry later 4, look at the server 5).
            pub fn exit_code(&self) -> i32 {
                match self { $(Error::$variant(_) => $exit,)* }
            }

            pub fn detail(&self) -> &Detail {
                match self { $(Error::$variant(d) => d,)* }
            }

            fn detail_mut(&mut self) -> &mut Detail {
                match self { $(Error::$variant(d) => d,)* }
            }
        }
    };
}

constructors! {
    validation => Validation, "validation_error", 2;
    not_found => NotFound, "not_found", 2;
    unsupported => Unsupported, "unsupported", 2;
    auth_required => AuthRequired, "auth_required", 3;
    insufficient_scope => InsufficientScope, "insufficient_scope", 3;
    rate_limited => RateLimited, "rate_limited", 4;
    provider_unavailable => ProviderUnavailable, "provider_unavailable", 4;
    provider_write_failed => ProviderWriteFailed, "provider_write_failed", 5;
    outcome_unknown => OutcomeUnknown, "outcome_unknown", 5;
    verification_failed => VerificationFailed, "verification_failed", 5;
    stale_state => StaleState, "stale_state", 5;
    confirmation_required => ConfirmationRequired, "confirmation_required", 6;
    confirmation_declined => ConfirmationDeclined, "confirmation_declined", 6;
    limit_exceeded => LimitExceeded, "limit_exceeded", 2;
    writes_disabled => WritesDisabled, "writes_disabled", 6;
    internal => Internal, "internal", 1;
}

impl Error {
    pub fn message(&self) -> &str {
        &self.detail().message
    }

    pub fn next_step(&self) -> Option<&str> {
        self.detail().next_step.as_deref()
    }

    /// The same error, its message saying which account it came from (`account work: …`).
    #[must_use]
    pub fn in_account(mut self, account: &impl std::fmt::Display) -> Self {
        let prefix = format!("account {account}: ");
        let detail = self.detail_mut();
        if !detail.message.starts_with(&prefix) {
            detail.message = format!("{prefix}{}", detail.message);
        }
        self
    }

    /// Attaches the step the user should take next (`run: mailbroker account add …`).
    #[must_use]
    pub fn with_next_step(mut self, step: impl Into<String>) -> Self {
        self.detail_mut().next_step = Some(step.into());
        self
    }

    /// The thing asked for does not exist (any more).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound(_))
    }

    /// Something was sent and whether it took effect is not known.
    pub fn is_unknown_outcome(&self) -> bool {
        matches!(self, Error::OutcomeUnknown(_))
    }

    /// The same request may succeed later without any change (rate limit, server away).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::RateLimited(_) | Error::ProviderUnavailable(_))
    }

    /// The account needs the person first: a login or a wider grant.
    pub fn needs_account_fix(&self) -> bool {
        matches!(self, Error::AuthRequired(_) | Error::InsufficientScope(_))
    }

    /// Prefixes the message with what was being done, keeping the error type.
    #[must_use]
    pub fn context(mut self, what: impl fmt::Display) -> Self {
        let detail = self.detail_mut();
        detail.message = format!("{what}: {}", detail.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.error_type(), self.message())?;
        if let Some(step) = self.next_step() {
            write!(f, " (next: {step})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    /// One error of every type, in the order of the variants.
    fn every() -> Vec<Error> {
        vec![
            Error::validation("x"),
            Error::not_found("x"),
            Error::unsupported("x"),
            Error::auth_required("x"),
            Error::insufficient_scope("x"),
            Error::rate_limited("x"),
            Error::provider_unavailable("x"),
            Error::provider_write_failed("x"),
            Error::outcome_unknown("x"),
            Error::verification_failed("x"),
            Error::stale_state("x"),
            Error::confirmation_required("x"),
            Error::confirmation_declined("x"),
            Error::limit_exceeded("x"),
            Error::writes_disabled("x"),
            Error::internal("x"),
        ]
    }

    #[test]
    fn error_types_are_the_spec_strings() {
        let all = every();
        let spec = "validation_error, not_found, unsupported, auth_required, insufficient_scope, \
                    rate_limited, provider_unavailable, provider_write_failed, outcome_unknown, \
                    verification_failed, stale_state, confirmation_required, \
                    confirmation_declined, limit_exceeded, writes_disabled, internal";
        let ours: Vec<&str> = all.iter().map(Error::error_type).collect();
        assert_eq!(ours.join(", "), spec);
        assert_eq!(Error::TYPES, ours);
        assert!(all.iter().all(|e| e.exit_code() != 0));
    }

    #[test]
    fn predicates_hold_for_exactly_their_types() {
        let which = |f: fn(&Error) -> bool| -> Vec<&str> {
            every()
                .into_iter()
                .filter(&f)
                .map(|e| e.error_type())
                .collect()
        };
        assert_eq!(which(Error::is_not_found), ["not_found"]);
        assert_eq!(which(Error::is_unknown_outcome), ["outcome_unknown"]);
        assert_eq!(
            which(Error::is_retryable),
            ["rate_limited", "provider_unavailable"]
        );
        assert_eq!(
            which(Error::needs_account_fix),
            ["auth_required", "insufficient_scope"]
        );
    }

    #[test]
    fn display_carries_next_step_and_context() {
        let e = Error::auth_required("login refused")
            .context("account work")
            .with_next_step("run: mailbroker account remove work");
        assert_eq!(
            e.to_string(),
            "auth_required: account work: login refused (next: run: mailbroker account remove work)"
        );
    }
}
