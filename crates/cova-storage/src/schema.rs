// The one schema for both databases: portable column types only (see migrations/).

diesel::table! {
    accounts (id) {
        id -> Text,
        email -> Text,
        email_confirmed_at -> Nullable<BigInt>,
        active_tokens -> Integer,
        free_comments_left -> BigInt,
        created_at -> BigInt,
        alert_seq -> BigInt,
        password_hash -> Nullable<Text>,
    }
}

diesel::table! {
    api_tokens (id) {
        id -> Text,
        account_id -> Text,
        name -> Text,
        prefix -> Text,
        token_hash -> Text,
        scopes -> Text,
        created_at -> BigInt,
        last_used_at -> Nullable<BigInt>,
        revoked_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    balances (account_id, month) {
        account_id -> Text,
        month -> Text,
        granted -> BigInt,
        reserved -> BigInt,
        spent -> BigInt,
    }
}

diesel::table! {
    reservations (job_id) {
        job_id -> Text,
        account_id -> Text,
        month -> Text,
        amount -> BigInt,
        state -> Text,
        charged -> BigInt,
        created_at -> BigInt,
        closed_at -> Nullable<BigInt>,
        free_amount -> BigInt,
    }
}

diesel::table! {
    ledger (id) {
        id -> Text,
        account_id -> Text,
        month -> Text,
        kind -> Text,
        amount -> BigInt,
        job_id -> Nullable<Text>,
        note -> Nullable<Text>,
        created_at -> BigInt,
    }
}

diesel::table! {
    jobs (id) {
        id -> Text,
        account_id -> Text,
        token_id -> Nullable<Text>,
        kind -> Text,
        #[sql_name = "ref"]
        ref_ -> Text,
        url -> Text,
        status -> Text,
        created_at -> BigInt,
        started_at -> Nullable<BigInt>,
        finished_at -> Nullable<BigInt>,
        comments_collected -> BigInt,
        comments_expected -> Nullable<BigInt>,
        truncated -> Bool,
        error_code -> Nullable<Text>,
        error_detail -> Nullable<Text>,
        session_id -> Nullable<Text>,
        batch_id -> Nullable<Text>,
        comments_new -> Nullable<BigInt>,
        truncated_reason -> Nullable<Text>,
        comments_day -> Nullable<BigInt>,
        hold_stage -> Text,
        waiting_since -> Nullable<BigInt>,
        max_comments -> Nullable<BigInt>,
        free_allowance -> Bool,
        comments_off -> Bool,
    }
}

diesel::table! {
    batches (id) {
        id -> Text,
        account_id -> Text,
        token_id -> Nullable<Text>,
        session_id -> Nullable<Text>,
        idempotency_key -> Nullable<Text>,
        request_digest -> Text,
        created_at -> BigInt,
        cancelled_at -> Nullable<BigInt>,
        finished_at -> Nullable<BigInt>,
        max_comments -> Nullable<BigInt>,
    }
}

diesel::table! {
    batch_items (batch_id, position) {
        batch_id -> Text,
        position -> Integer,
        account_id -> Text,
        url -> Text,
        #[sql_name = "ref"]
        ref_ -> Nullable<Text>,
        state -> Text,
        job_id -> Nullable<Text>,
        deduplicated -> Nullable<Text>,
        error_code -> Nullable<Text>,
        error_detail -> Nullable<Text>,
        queued_at -> BigInt,
        known_comments -> Nullable<BigInt>,
    }
}

diesel::table! {
    job_comments (job_id, comment_id) {
        job_id -> Text,
        comment_id -> Text,
        parent_id -> Nullable<Text>,
        position -> BigInt,
        body -> Text,
        likes -> BigInt,
        posted_at -> BigInt,
        search -> Text,
        first_seen_at -> Nullable<BigInt>,
        thread -> Nullable<BigInt>,
        comments_day -> BigInt,
        sentiment -> Nullable<SmallInt>,
        terms -> Nullable<Text>,
        language -> Nullable<Text>,
        author -> Nullable<Text>,
        media -> Bool,
    }
}

diesel::table! {
    analyses (account_id, ref_) {
        id -> Text,
        account_id -> Text,
        #[sql_name = "ref"]
        ref_ -> Text,
        url -> Text,
        platform -> Text,
        status -> Text,
        metadata -> Nullable<Text>,
        search -> Text,
        created_at -> BigInt,
        saved_at -> Nullable<BigInt>,
        last_scraped_at -> Nullable<BigInt>,
        expires_at -> Nullable<BigInt>,
        last_job_id -> Nullable<Text>,
        comment_count -> BigInt,
        top_level_count -> BigInt,
        new_count -> BigInt,
        watch_enabled -> Bool,
        watch_interval_min -> Integer,
        watch_next_run_at -> Nullable<BigInt>,
        watch_last_run_at -> Nullable<BigInt>,
        watch_last_error -> Nullable<Text>,
        watch_claimed_until -> BigInt,
        creator_ref -> Nullable<Text>,
        watch_until -> Nullable<BigInt>,
        comments_day -> Nullable<BigInt>,
        max_comments -> Nullable<BigInt>,
    }
}

diesel::table! {
    creators (id) {
        id -> Text,
        account_id -> Text,
        #[sql_name = "ref"]
        ref_ -> Text,
        platform -> Text,
        listing -> Text,
        profile -> Text,
        created_at -> BigInt,
        since_at -> BigInt,
        watch_enabled -> Bool,
        watch_interval_min -> Integer,
        collect_comments -> Bool,
        follow_days -> Integer,
        next_run_at -> Nullable<BigInt>,
        last_run_at -> Nullable<BigInt>,
        last_error -> Nullable<Text>,
        claimed_until -> BigInt,
    }
}

diesel::table! {
    creator_posts (account_id, creator_ref, post_ref) {
        account_id -> Text,
        creator_ref -> Text,
        post_ref -> Text,
        url -> Text,
        title -> Nullable<Text>,
        published_at -> BigInt,
        pinned -> Bool,
        found_at -> BigInt,
        batch_id -> Nullable<Text>,
    }
}

diesel::table! {
    outbox (id) {
        id -> Text,
        destination -> Text,
        routing_key -> Text,
        payload -> Text,
        headers -> Text,
        created_at -> BigInt,
        sent_at -> Nullable<BigInt>,
        attempts -> Integer,
        last_error -> Nullable<Text>,
        next_attempt_at -> BigInt,
        claimed_until -> BigInt,
        parked_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    idempotency_keys (account_id, key) {
        account_id -> Text,
        key -> Text,
        job_id -> Text,
        #[sql_name = "ref"]
        ref_ -> Text,
        created_at -> BigInt,
    }
}

diesel::table! {
    job_leases (job_id) {
        job_id -> Text,
        owner -> Text,
        expires_at -> BigInt,
    }
}

diesel::table! {
    keywords (account_id, normalized) {
        account_id -> Text,
        keyword -> Text,
        normalized -> Text,
        position -> Integer,
    }
}

diesel::table! {
    channels (account_id) {
        account_id -> Text,
        telegram_chat_id -> Nullable<Text>,
        telegram_enabled -> Bool,
        telegram_disabled_reason -> Nullable<Text>,
        webhook_url -> Nullable<Text>,
        webhook_enabled -> Bool,
        webhook_job_events -> Bool,
        webhook_secret -> Nullable<Text>,
        webhook_disabled_reason -> Nullable<Text>,
        updated_at -> BigInt,
    }
}

diesel::table! {
    spike_settings (account_id, subject) {
        account_id -> Text,
        subject -> Text,
        enabled -> Bool,
        sensitivity -> Text,
        min_comments -> Nullable<BigInt>,
        cooldown_min -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    spike_alerts (id) {
        id -> Text,
        account_id -> Text,
        seq -> BigInt,
        kind -> Text,
        #[sql_name = "ref"]
        ref_ -> Text,
        window_start -> BigInt,
        window_end -> BigInt,
        body -> Text,
        created_at -> BigInt,
    }
}

diesel::table! {
    keyword_alerts (id) {
        id -> Text,
        account_id -> Text,
        seq -> BigInt,
        keyword -> Text,
        #[sql_name = "ref"]
        ref_ -> Text,
        comment_id -> Text,
        comment -> Text,
        created_at -> BigInt,
        creator -> Nullable<Text>,
    }
}

diesel::table! {
    deliveries (id) {
        id -> Text,
        account_id -> Text,
        event_id -> Text,
        event_type -> Text,
        channel -> Text,
        payload -> Text,
        state -> Text,
        attempts -> Integer,
        next_attempt_at -> BigInt,
        claimed_until -> BigInt,
        last_status -> Nullable<Integer>,
        last_error -> Nullable<Text>,
        delivered_at -> Nullable<BigInt>,
        created_at -> BigInt,
    }
}

diesel::table! {
    ai_quotes (id) {
        id -> Text,
        account_id -> Text,
        #[sql_name = "ref"]
        ref_ -> Text,
        source_job_id -> Text,
        tasks -> Text,
        comments -> BigInt,
        charge -> BigInt,
        created_at -> BigInt,
        expires_at -> BigInt,
        job_id -> Nullable<Text>,
    }
}

diesel::table! {
    ai_jobs (job_id) {
        job_id -> Text,
        quote_id -> Text,
        source_job_id -> Text,
        tasks -> Text,
        comments -> BigInt,
        charge -> BigInt,
        model -> Nullable<Text>,
        tokens_used -> Nullable<BigInt>,
        result -> Nullable<Text>,
    }
}

diesel::table! {
    ai_consents (id) {
        id -> Text,
        account_id -> Text,
        token_id -> Nullable<Text>,
        #[sql_name = "ref"]
        ref_ -> Text,
        job_id -> Text,
        created_at -> BigInt,
    }
}

diesel::table! {
    ai_queries (account_id, ref_) {
        account_id -> Text,
        #[sql_name = "ref"]
        ref_ -> Text,
        queries -> Text,
        updated_at -> BigInt,
    }
}

diesel::table! {
    media (id) {
        id -> Text,
        account_id -> Text,
        #[sql_name = "ref"]
        ref_ -> Text,
        slot -> Text,
        kind -> Text,
        n -> Integer,
        source_url -> Text,
        width -> Nullable<Integer>,
        height -> Nullable<Integer>,
        content_key -> Nullable<Text>,
        content_type -> Nullable<Text>,
        size -> Nullable<BigInt>,
        fetched_at -> Nullable<BigInt>,
        fetch_error -> Nullable<Text>,
        created_at -> BigInt,
        expires_at -> BigInt,
    }
}

diesel::table! {
    sessions (id) {
        id -> Text,
        account_id -> Text,
        secret_hash -> Text,
        csrf_token -> Text,
        created_at -> BigInt,
        last_seen_at -> BigInt,
        idle_expires_at -> BigInt,
        expires_at -> BigInt,
        revoked_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    email_links (token_hash) {
        token_hash -> Text,
        account_id -> Text,
        purpose -> Text,
        created_at -> BigInt,
        expires_at -> BigInt,
        used_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    purchases (checkout_id) {
        checkout_id -> Text,
        account_id -> Text,
        pack -> Text,
        comments -> BigInt,
        amount -> BigInt,
        currency -> Text,
        created_at -> BigInt,
        paid_at -> Nullable<BigInt>,
        event_id -> Nullable<Text>,
        mismatch -> Nullable<Text>,
        mismatch_event_id -> Nullable<Text>,
    }
}

diesel::table! {
    queue_journal (queue, id) {
        queue -> Text,
        id -> Text,
        routing_key -> Text,
        payload -> Text,
        headers -> Text,
        attempt -> Integer,
        kept_at -> BigInt,
    }
}

diesel::joinable!(api_tokens -> accounts (account_id));
diesel::joinable!(sessions -> accounts (account_id));

// Only the tables a query really joins or nests may appear together. Declaring every pair of
// the 30 tables (diesel's default) generated 870 impls whose coherence checks were a third of
// this crate's build.
diesel::allow_tables_to_appear_in_same_query!(accounts, balances, jobs);
diesel::allow_tables_to_appear_in_same_query!(jobs, analyses);
diesel::allow_tables_to_appear_in_same_query!(jobs, reservations);
diesel::allow_tables_to_appear_in_same_query!(sessions, accounts);
diesel::allow_tables_to_appear_in_same_query!(api_tokens, accounts);
diesel::allow_tables_to_appear_in_same_query!(batch_items, batches);
