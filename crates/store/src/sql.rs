//! A statement built in pieces, with its values bound as it grows.
//!
//! sqlx's `QueryBuilder` asks the database type how to write a placeholder, and its `Any`
//! type (the store's, so one statement serves SQLite and PostgreSQL) answers `?`, which
//! PostgreSQL does not take. This builder writes each engine's own: `$1`, `$2`, … on
//! PostgreSQL, `?` on SQLite. Not `$N` on SQLite too: sqlx asks SQLite the name of every
//! numbered parameter, which SQLite finds by walking its list of names, so a statement of
//! thousands of values (a batch of 200 messages has 2,600) took time in their square; it made
//! a first sync 2.5× slower (BENCHMARKS.md, "Placeholders, and an optimised build").

use std::fmt::{Display, Write};

use sqlx::any::{Any, AnyArguments};
use sqlx::{Arguments, Encode, Type};

use std::sync::Arc;

use super::Backend;
use super::words::Lexicon;

/// A statement and the values bound so far; the same method names as sqlx's builder.
pub(crate) struct Sql {
    text: String,
    args: AnyArguments,
    backend: Backend,
    /// The words of a query's phrases, where PostgreSQL is to match them (`words`).
    lexicon: Option<Arc<Lexicon>>,
}

impl Sql {
    /// A statement for `backend`, which writes its placeholders and any pieces that depend on
    /// the engine (`backend()`).
    pub(crate) fn new(backend: Backend, start: impl Into<String>) -> Sql {
        Sql {
            text: start.into(),
            args: AnyArguments::default(),
            backend,
            lexicon: None,
        }
    }

    /// A search's statement on PostgreSQL, its phrases' words cut beforehand.
    pub(crate) fn with_lexicon(mut self, lexicon: Option<Arc<Lexicon>>) -> Sql {
        self.lexicon = lexicon;
        self
    }

    pub(crate) fn backend(&self) -> Backend {
        self.backend
    }

    pub(crate) fn lexicon(&self) -> Option<&Lexicon> {
        self.lexicon.as_deref()
    }

    pub(crate) fn push(&mut self, piece: impl Display) -> &mut Self {
        // Writing to a String cannot fail.
        let _ = write!(self.text, "{piece}");
        self
    }

    pub(crate) fn push_bind<'t, T>(&mut self, value: T) -> &mut Self
    where
        T: Encode<'t, Any> + Type<Any>,
    {
        // Encoding into `Any`'s buffer only copies the value; it has no failure to report,
        // and a failure here would surface as a count of values unlike the placeholders.
        let _ = self.args.add(value);
        match self.backend {
            // Anonymous: bound in the order written, which is the order added.
            Backend::Sqlite => self.push("?"),
            Backend::Postgres => {
                let n = self.args.len();
                self.push(format_args!("${n}"))
            }
        }
    }

    /// Pieces pushed through the result are joined by `separator`.
    pub(crate) fn separated(&mut self, separator: &'static str) -> Separated<'_> {
        Separated {
            sql: self,
            separator,
            first: true,
        }
    }

    /// `VALUES (…), (…)`: one parenthesised row for each item, written by `row`.
    pub(crate) fn push_values<I, F>(&mut self, items: I, mut row: F) -> &mut Self
    where
        I: IntoIterator,
        F: FnMut(Separated<'_>, I::Item),
    {
        self.push("VALUES ");
        for (i, item) in items.into_iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.push("(");
            row(self.separated(", "), item);
            self.push(")");
        }
        self
    }

    #[cfg(test)]
    fn sql(&self) -> &str {
        &self.text
    }

    fn take(&mut self) -> (sqlx::AssertSqlSafe<String>, AnyArguments) {
        (
            sqlx::AssertSqlSafe(std::mem::take(&mut self.text)),
            std::mem::take(&mut self.args),
        )
    }

    pub(crate) fn build(&mut self) -> sqlx::query::Query<'static, Any, AnyArguments> {
        let (text, args) = self.take();
        sqlx::query_with(text, args)
    }

    pub(crate) fn build_query_as<T>(
        &mut self,
    ) -> sqlx::query::QueryAs<'static, Any, T, AnyArguments>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow>,
    {
        let (text, args) = self.take();
        sqlx::query_as_with(text, args)
    }

    pub(crate) fn build_query_scalar<T>(
        &mut self,
    ) -> sqlx::query::QueryScalar<'static, Any, T, AnyArguments>
    where
        (T,): for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow>,
    {
        let (text, args) = self.take();
        sqlx::query_scalar_with(text, args)
    }
}

/// Part of a statement whose pieces are joined by a separator.
pub(crate) struct Separated<'a> {
    sql: &'a mut Sql,
    separator: &'static str,
    first: bool,
}

impl Separated<'_> {
    fn next(&mut self) {
        if !self.first {
            self.sql.push(self.separator);
        }
        self.first = false;
    }

    pub(crate) fn push_bind<'t, T>(&mut self, value: T) -> &mut Self
    where
        T: Encode<'t, Any> + Type<Any>,
    {
        self.next();
        self.sql.push_bind(value);
        self
    }
}

/// A yes/no column: an integer 0/1 on SQLite (which has no booleans), an integer or a
/// `boolean` (what `EXISTS` gives) on PostgreSQL. Rows read it as `Bit` and the store hands on
/// the `bool` (`#[sqlx(try_from = "Bit")]`).
pub(crate) struct Bit(bool);

impl From<Bit> for bool {
    fn from(bit: Bit) -> bool {
        bit.0
    }
}

impl Type<Any> for Bit {
    fn type_info() -> sqlx::any::AnyTypeInfo {
        <i64 as Type<Any>>::type_info()
    }

    fn compatible(ty: &sqlx::any::AnyTypeInfo) -> bool {
        <i64 as Type<Any>>::compatible(ty) || <bool as Type<Any>>::compatible(ty)
    }
}

impl<'r> sqlx::Decode<'r, Any> for Bit {
    fn decode(
        value: <Any as sqlx::Database>::ValueRef<'r>,
    ) -> Result<Self, sqlx::error::BoxDynError> {
        use sqlx::ValueRef;
        if <bool as Type<Any>>::compatible(&value.type_info()) {
            return Ok(Bit(<bool as sqlx::Decode<'r, Any>>::decode(value)?));
        }
        Ok(Bit(<i64 as sqlx::Decode<'r, Any>>::decode(value)? != 0))
    }
}

/// A Rust enum stored as one of a few names in a text column: its `as_str`, and how `Any`
/// (either engine) writes and reads it. An unknown name in a row is a decoding error.
macro_rules! text_column {
    ($ty:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        impl $ty {
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $text),+
                }
            }
        }

        impl sqlx::Type<sqlx::Any> for $ty {
            fn type_info() -> sqlx::any::AnyTypeInfo {
                <String as sqlx::Type<sqlx::Any>>::type_info()
            }

            fn compatible(ty: &sqlx::any::AnyTypeInfo) -> bool {
                <String as sqlx::Type<sqlx::Any>>::compatible(ty)
            }
        }

        impl<'q> sqlx::Encode<'q, sqlx::Any> for $ty {
            fn encode_by_ref(
                &self,
                buf: &mut <sqlx::Any as sqlx::Database>::ArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <String as sqlx::Encode<'q, sqlx::Any>>::encode(self.as_str().to_owned(), buf)
            }
        }

        impl<'r> sqlx::Decode<'r, sqlx::Any> for $ty {
            fn decode(value: <sqlx::Any as sqlx::Database>::ValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
                let text = <String as sqlx::Decode<'r, sqlx::Any>>::decode(value)?;
                match text.as_str() {
                    $($text => Ok($ty::$variant),)+
                    other => Err(format!("not a {}: {other}", stringify!($ty)).into()),
                }
            }
        }
    };
}
pub(crate) use text_column;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_each_engines_in_order() {
        let written = |backend| {
            let mut q = Sql::new(backend, "SELECT * FROM t WHERE a = ");
            q.push_bind(1_i64).push(" AND b IN (");
            let mut list = q.separated(", ");
            list.push_bind("x").push_bind("y");
            q.push(") ");
            q.push_values([(1_i64, "p")], |mut row, (n, s)| {
                row.push_bind(n).push_bind(s);
            });
            q.sql().to_string()
        };
        assert_eq!(
            written(Backend::Postgres),
            "SELECT * FROM t WHERE a = $1 AND b IN ($2, $3) VALUES ($4, $5)"
        );
        assert_eq!(
            written(Backend::Sqlite),
            "SELECT * FROM t WHERE a = ? AND b IN (?, ?) VALUES (?, ?)"
        );
    }
}
