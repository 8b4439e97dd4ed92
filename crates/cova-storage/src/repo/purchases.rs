//! Packs bought through the payment provider. A purchase is opened with the checkout and paid
//! by the provider's webhook: the payment mark and the grant share one transaction, and the
//! mark is conditional, so a pack is granted once per checkout however often the event comes.

use super::balances::{Balance, balance_of};
use crate::schema::purchases;
use crate::{Change, Db, Result};
use cova_domain::time::month_of;
use diesel::prelude::*;

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = purchases)]
pub struct Purchase {
    pub checkout_id: String,
    pub account_id: String,
    pub pack: String,
    pub comments: i64,
    pub amount: i64,
    pub currency: String,
    pub created_at: i64,
    pub paid_at: Option<i64>,
    pub event_id: Option<String>,
    /// Why a payment event for this checkout granted nothing (its amount, currency or status
    /// differed from the checkout's), for the operator.
    pub mismatch: Option<String>,
    pub mismatch_event_id: Option<String>,
}

pub struct NewPurchase<'a> {
    pub checkout_id: &'a str,
    pub account_id: &'a str,
    pub pack: &'a str,
    pub comments: i64,
    pub amount: i64,
    pub currency: &'a str,
}

pub async fn open(db: &Db, new: NewPurchase<'_>, now: i64) -> Result<()> {
    let insert = diesel::insert_into(purchases::table).values((
        purchases::checkout_id.eq(new.checkout_id),
        purchases::account_id.eq(new.account_id),
        purchases::pack.eq(new.pack),
        purchases::comments.eq(new.comments),
        purchases::amount.eq(new.amount),
        purchases::currency.eq(new.currency),
        purchases::created_at.eq(now),
    ));
    db.conn().await?.tx().execute(insert).await?;
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Paid {
    /// This event paid the checkout: the pack was added to the current month.
    Granted { account_id: String, balance: Balance },
    /// The checkout was paid before (a repeated or second event): nothing granted.
    AlreadyPaid,
    /// No checkout with this id was opened by cova.
    Unknown,
    /// The event's payment differs from the checkout cova opened: nothing granted, the reason
    /// recorded on the purchase.
    Mismatch { account_id: String, reason: String },
}

/// What a payment event says was paid for a checkout.
#[derive(Debug, Clone, Copy)]
pub struct Payment<'a> {
    /// In the currency's minor unit; `None` when the event does not say.
    pub amount: Option<i64>,
    pub currency: Option<&'a str>,
}

/// Why `payment` does not pay for `purchase`, if it does not: the exact amount in the same
/// currency is required (a checkout for 50,000 comments paid with one cent grants nothing).
pub fn mismatch(purchase: &Purchase, payment: Payment<'_>) -> Option<String> {
    let currency_ok = payment.currency.is_some_and(|c| c.eq_ignore_ascii_case(&purchase.currency));
    if payment.amount == Some(purchase.amount) && currency_ok {
        return None;
    }
    let shown = |amount: Option<i64>, currency: Option<&str>| {
        format!("{} {}", amount.map_or("no amount".to_owned(), |a| a.to_string()), currency.unwrap_or("(no currency)"))
    };
    Some(format!(
        "paid {} for a checkout of {}",
        shown(payment.amount, payment.currency),
        shown(Some(purchase.amount), Some(&purchase.currency))
    ))
}

/// Marks the checkout paid by `event_id` and grants its pack to the month of `now`, once, when
/// `payment` matches the checkout; otherwise records the mismatch and grants nothing.
pub async fn pay(db: &Db, checkout_id: &str, event_id: &str, payment: Payment<'_>, now: i64) -> Result<Paid> {
    let month = month_of(now);
    let mut t = db.begin().await?;
    let paid = pay_in(&mut t.tx(), checkout_id, event_id, payment, &month, now).await?;
    t.commit().await?;
    if let Paid::Granted { account_id, .. } = &paid {
        db.changed(&[Change::Account(account_id)]).await;
    }
    Ok(paid)
}

async fn pay_in(
    tx: &mut crate::Tx<'_>,
    checkout_id: &str,
    event_id: &str,
    payment: Payment<'_>,
    month: &str,
    now: i64,
) -> Result<Paid> {
    let purchase = tx.first_as::<Purchase, _>(purchases::table.find(checkout_id)).await.optional()?;
    let Some(purchase) = purchase else { return Ok(Paid::Unknown) };
    if purchase.paid_at.is_some() {
        return Ok(Paid::AlreadyPaid);
    }
    if let Some(reason) = mismatch(&purchase, payment) {
        tx.execute(
            diesel::update(purchases::table.find(checkout_id))
                .filter(purchases::paid_at.is_null())
                .set((purchases::mismatch.eq(&reason), purchases::mismatch_event_id.eq(event_id))),
        )
        .await?;
        return Ok(Paid::Mismatch { account_id: purchase.account_id, reason });
    }
    let marked = tx
        .execute(
            diesel::update(purchases::table.find(checkout_id))
                .filter(purchases::paid_at.is_null())
                .set((purchases::paid_at.eq(now), purchases::event_id.eq(event_id))),
        )
        .await?;
    if marked == 0 {
        return Ok(Paid::AlreadyPaid);
    }
    let note = format!("pack {} (checkout {checkout_id})", purchase.pack);
    let row = crate::repo::balances::grant_in(tx, &purchase.account_id, month, purchase.comments, &note, now).await?;
    Ok(Paid::Granted { account_id: purchase.account_id, balance: balance_of(month.to_owned(), now, Some(row)) })
}

/// The account's purchases, newest first.
pub async fn list(db: &Db, account_id: &str, limit: i64) -> Result<Vec<Purchase>> {
    let query =
        purchases::table.filter(purchases::account_id.eq(account_id)).order(purchases::created_at.desc()).limit(limit);
    Ok(db.conn().await?.tx().load_as::<Purchase, _>(query).await?)
}
