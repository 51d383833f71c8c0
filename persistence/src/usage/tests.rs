use chrono::TimeZone;

use super::*;

use crate::test_support::migrated as db;

#[tokio::test]
async fn counts_of_one_key_add_up_and_read_back_by_day_and_by_channel() {
    let (_dir, db) = db().await;
    let day1 = Utc
        .with_ymd_and_hms(2026, 11, 30, 23, 0, 0)
        .single()
        .expect("time");
    let day2 = Utc
        .with_ymd_and_hms(2026, 12, 1, 1, 0, 0)
        .single()
        .expect("time");
    let channel = Uuid::now_v7();
    let count = |at, metric, value| Count::new(7, at, metric, value).on(channel);
    add(
        &db,
        &[
            count(day1, Metric::ModelPromptTokens, 10),
            count(day1, Metric::ModelPromptTokens, 5),
        ],
    )
    .await
    .expect("add");
    add(
        &db,
        &[
            count(day1, Metric::ModelPromptTokens, 1),
            count(day2, Metric::McpCalls, 2),
        ],
    )
    .await
    .expect("add again");
    add(&db, &[Count::new(8, day1, Metric::McpCalls, 100)])
        .await
        .expect("another workspace");

    let (from, to) = (day1.date_naive(), day2.date_naive());
    let by_day = read(&db, Some(7), from, to, GroupBy::Day)
        .await
        .expect("read");
    assert_eq!(by_day.totals["model_prompt_tokens"], 16);
    assert_eq!(by_day.totals["mcp_calls"], 2);
    assert_eq!(by_day.totals["media_bytes"], 0);
    assert_eq!(by_day.buckets.len(), 2);
    assert_eq!(by_day.buckets[0].day, Some(from));
    assert_eq!(by_day.buckets[0].figures["model_prompt_tokens"], 16);
    assert_eq!(by_day.buckets[1].figures["mcp_calls"], 2);

    let by_channel = read(&db, Some(7), from, to, GroupBy::Channel)
        .await
        .expect("read");
    assert_eq!(by_channel.buckets.len(), 1);
    assert_eq!(by_channel.buckets[0].id, Some(channel));

    // The month of day 2 holds none of day 1's tokens.
    assert_eq!(month_tokens(&db, 7, from).await.expect("month"), 16);
    assert_eq!(month_tokens(&db, 7, to).await.expect("month"), 0);
    let all = installation_totals(&db).await.expect("totals");
    assert_eq!(all["mcp_calls"], 102);
}

#[tokio::test]
async fn a_count_of_no_channel_is_kept_and_read_back_under_none() {
    let (_dir, db) = db().await;
    let now = Utc::now();
    add(&db, &[Count::new(99, now, Metric::EventDeliveries, 5)])
        .await
        .expect("add");
    add(&db, &[Count::new(99, now, Metric::EventDeliveries, 2)])
        .await
        .expect("add");
    let day = now.date_naive();
    let read = read(&db, Some(99), day, day, GroupBy::Channel)
        .await
        .expect("read");
    assert_eq!(read.totals["event_deliveries"], 7);
    assert_eq!(read.buckets.len(), 1, "one row: the nil key meets itself");
    assert_eq!(read.buckets[0].id, None);
}

#[tokio::test]
async fn quotas_are_set_replaced_and_lifted() {
    let (_dir, db) = db().await;
    assert!(quotas::get(&db, 3).await.expect("get").is_unlimited());
    let mut set = quotas::Quotas {
        model_tokens_per_month: Some(1000),
        ..Default::default()
    };
    set.messages_per_day_by_category
        .insert(Category::Marketing, 10);
    quotas::set(&db, 3, &set, Utc::now()).await.expect("set");
    assert_eq!(quotas::get(&db, 3).await.expect("get"), set);
    assert_eq!(quotas::all(&db).await.expect("all").len(), 1);
    quotas::set(&db, 3, &quotas::Quotas::default(), Utc::now())
        .await
        .expect("lift");
    assert!(quotas::all(&db).await.expect("all").is_empty());
}

#[test]
fn months_start_and_end_across_the_year() {
    let day = NaiveDate::from_ymd_opt(2026, 12, 15).expect("day");
    assert_eq!(
        month_start(day),
        NaiveDate::from_ymd_opt(2026, 12, 1).expect("day")
    );
    assert_eq!(
        next_month(day),
        NaiveDate::from_ymd_opt(2027, 1, 1).expect("day")
    );
}
