//! The vocabulary stored as text (`queued`, `analyze`, `ready`…), read and written by the
//! database layer as these types (the `diesel` feature): a stored value this version does not
//! know is an error of the read, never a silent default.

use diesel::backend::Backend;
use diesel::deserialize::{self, FromSql};
use diesel::serialize::{self, Output, ToSql};
use diesel::sql_types::Text;

macro_rules! stored_as_text {
    ($($ty:ty),* $(,)?) => {$(
        impl<DB> ToSql<Text, DB> for $ty
        where
            DB: Backend,
            str: ToSql<Text, DB>,
        {
            fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, DB>) -> serialize::Result {
                self.as_str().to_sql(out)
            }
        }

        impl<DB> FromSql<Text, DB> for $ty
        where
            DB: Backend,
            String: FromSql<Text, DB>,
        {
            fn from_sql(bytes: DB::RawValue<'_>) -> deserialize::Result<Self> {
                let text = String::from_sql(bytes)?;
                <$ty>::parse(&text).ok_or_else(|| format!("unknown {} `{text}`", stringify!($ty)).into())
            }
        }
    )*};
}

stored_as_text!(crate::JobStatus, crate::JobKind, crate::AnalysisStatus, crate::money::Stage);
