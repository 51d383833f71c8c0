//! Operators are people: invited by an admin, they set a password once through a one-time
//! link and sign in with it; sessions are rows (kept over a restart, valid on another server
//! of the same database) that end at once when the operator is disabled; conversations are
//! assigned, noted privately, searched; saved replies go out by their shortcut; and who
//! answered is on every operator message.

use reqwest::StatusCode;
use sea_orm::{ConnectionTrait, Statement};
use serde_json::{Value, json};

use crate::console::{NUMBER, Tab, sheena_writes};
use crate::event_webhooks::{Receiver, endpoint};
use crate::helpers::{TestApp, expect_error, expect_status, spawn_app, spawn_app_with};

const PASSWORD: &str = "correct horse battery";

/// Invites `email` as `role`; answers the operator record (with its link).
async fn invite(app: &TestApp, email: &str, name: &str, role: &str) -> Value {
    let body = json!({"email": email, "name": name, "role": role});
    let created = expect_status(
        app.send_json(reqwest::Method::POST, "/workspace/operators", &body)
            .await,
        201,
    )
    .await;
    created["data"].clone()
}

/// The path of an invitation's link.
fn link_path(invited: &Value) -> String {
    let url = invited["invitation"]["url"].as_str().expect("a link");
    let at = url
        .find("/console/invitation/")
        .expect("the console's path");
    url[at..].to_owned()
}

/// Invites `email` and sets their password; answers a tab signed in as them.
async fn operator(app: &TestApp, email: &str, name: &str, role: &str) -> Tab {
    let invited = invite(app, email, name, role).await;
    let mut tab = Tab::new(app);
    let set = tab
        .post(
            &link_path(&invited),
            &[
                ("name", name),
                ("password", PASSWORD),
                ("confirm", PASSWORD),
            ],
        )
        .await;
    assert_eq!(set.status, StatusCode::SEE_OTHER, "{}", set.body);
    sign_in(&mut tab, email).await;
    tab
}

async fn sign_in(tab: &mut Tab, email: &str) {
    let page = tab
        .post(
            "/console/sign-in",
            &[("email", email), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert_eq!(page.location.as_deref(), Some("/console/conversations"));
}

#[tokio::test]
async fn an_invited_operator_sets_a_password_once_and_signs_in_with_it() {
    let app = spawn_app().await;

    let invited = invite(&app, "Ana@Acme.test", "Ana", "agent").await;
    assert_eq!(invited["email"], "ana@acme.test");
    assert_eq!(invited["status"], "invited");
    assert_eq!(invited["invitation"]["mailed"], false);
    assert!(
        invited["invitation"]["url"]
            .as_str()
            .expect("url")
            .starts_with("http://127.0.0.1:")
    );
    let link = link_path(&invited);
    let mut tab = Tab::new(&app);
    let form = tab.get(&link).await;
    assert_eq!(form.status, StatusCode::OK);
    assert!(form.body.contains("ana@acme.test"));

    // A weak password is refused with what it lacks; two different ones too.
    let weak = tab
        .post(
            &link,
            &[("name", "Ana"), ("password", "short"), ("confirm", "short")],
        )
        .await;
    assert_eq!(weak.status, StatusCode::BAD_REQUEST);
    assert!(
        weak.body.contains("at least 12 characters"),
        "{}",
        weak.body
    );
    let differ = tab
        .post(
            &link,
            &[
                ("name", "Ana"),
                ("password", PASSWORD),
                ("confirm", "another one 2"),
            ],
        )
        .await;
    assert_eq!(differ.status, StatusCode::BAD_REQUEST);
    assert!(differ.body.contains("The two passwords differ"));

    let set = tab
        .post(
            &link,
            &[
                ("name", "Ana Lima"),
                ("password", PASSWORD),
                ("confirm", PASSWORD),
            ],
        )
        .await;
    assert_eq!(set.status, StatusCode::SEE_OTHER, "{}", set.body);
    assert_eq!(
        set.location.as_deref(),
        Some("/console/sign-in?why=welcome")
    );

    // The link works once.
    let again = tab.get(&link).await;
    assert_eq!(again.status, StatusCode::GONE);
    assert!(again.body.contains("already used"), "{}", again.body);
    let unknown = tab.get("/console/invitation/not-a-token").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);

    // A wrong password is refused; the right one signs in, and the page names the operator.
    let wrong = tab
        .post(
            "/console/sign-in",
            &[
                ("email", "ana@acme.test"),
                ("password", "not the password 1"),
            ],
        )
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(wrong.body.contains("were not accepted"));
    assert!(wrong.set_cookie.is_none());
    sign_in(&mut tab, "ANA@acme.test").await;
    let inbox = tab.get("/console/conversations").await;
    assert_eq!(inbox.status, StatusCode::OK);
    assert!(
        inbox
            .body
            .contains(r#"<span id="operator-name">Ana Lima</span>"#)
    );

    let listed = expect_status(app.get("/workspace/operators").await, 200).await;
    assert_eq!(listed["data"][0]["status"], "active");
    assert_eq!(listed["data"][0]["name"], "Ana Lima");
    assert!(listed["data"][0].get("password_hash").is_none());
}

#[tokio::test]
async fn an_expired_invitation_is_refused_with_a_sentence_and_a_new_one_works() {
    let app = spawn_app().await;
    let invited = invite(&app, "bo@acme.test", "Bo", "agent").await;
    let db = app.db().await;
    db.execute_unprepared(
        "UPDATE operator_invitations SET expires_at = '2020-01-01T00:00:00+00:00'",
    )
    .await
    .expect("expired");
    let mut tab = Tab::new(&app);
    let expired = tab.get(&link_path(&invited)).await;
    assert_eq!(expired.status, StatusCode::GONE);
    assert!(expired.body.contains("expired"), "{}", expired.body);

    let id = invited["id"].as_str().expect("id");
    let renewed = expect_status(
        app.send_json(
            reqwest::Method::POST,
            &format!("/workspace/operators/{id}/invitation"),
            &json!({}),
        )
        .await,
        201,
    )
    .await;
    let fresh = tab.get(&link_path(&renewed["data"])).await;
    assert_eq!(fresh.status, StatusCode::OK);
}

#[tokio::test]
async fn only_an_admin_invites_and_bad_invitations_are_refused() {
    let app = spawn_app().await;
    let writer = app.key_with(&["read", "write"]).await;
    let refused = app
        .request(reqwest::Method::POST, "/workspace/operators", Some(&writer))
        .json(&json!({"email": "cy@acme.test"}))
        .send()
        .await
        .expect("request");
    expect_error(refused, 403, "forbidden").await;

    let bad = app
        .send_json(
            reqwest::Method::POST,
            "/workspace/operators",
            &json!({"email": "not an address", "role": "boss"}),
        )
        .await;
    let body = expect_error(bad, 400, "validation_failed").await;
    let fields: Vec<&str> = body["details"]
        .as_array()
        .expect("details")
        .iter()
        .filter_map(|d| d["path"][0].as_str())
        .collect();
    assert!(
        fields.contains(&"email") && fields.contains(&"role"),
        "{body}"
    );

    let cy = invite(&app, "cy@acme.test", "Cy", "agent").await;
    // Another business's admin neither sees nor changes this workspace's operators.
    let other = app
        .bootstrap_another("Globex Inc", "Globex", "owner@globex.test")
        .await;
    let theirs = app
        .request(
            reqwest::Method::GET,
            "/workspace/operators",
            Some(&other.api_key),
        )
        .send()
        .await
        .expect("request");
    let theirs = expect_status(theirs, 200).await;
    assert_eq!(theirs["data"], json!([]));
    let cy_id = cy["id"].as_str().expect("id");
    for (method, path) in [
        (
            reqwest::Method::PATCH,
            format!("/workspace/operators/{cy_id}"),
        ),
        (
            reqwest::Method::POST,
            format!("/workspace/operators/{cy_id}/invitation"),
        ),
    ] {
        let refused = app
            .request(method, &path, Some(&other.api_key))
            .json(&json!({"disabled": true}))
            .send()
            .await
            .expect("request");
        expect_error(refused, 404, "not_found").await;
    }
    let twice = app
        .send_json(
            reqwest::Method::POST,
            "/workspace/operators",
            &json!({"email": "CY@acme.test"}),
        )
        .await;
    expect_error(twice, 409, "conflict").await;
}

#[tokio::test]
async fn a_session_is_kept_over_a_restart_and_known_to_another_server_until_the_operator_is_disabled()
 {
    let app = spawn_app().await;
    let mut tab = operator(&app, "dee@acme.test", "Dee", "agent").await;

    // Another server on the same database knows the session, as a restarted one would.
    let (mut other, base) = crate::durability::serve(&app);
    let mut elsewhere = tab.at_other(&base);
    let page = elsewhere.get("/console/conversations").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("Dee"));

    // Disabled, the operator's sessions end at once, everywhere.
    let listed = expect_status(app.get("/workspace/operators").await, 200).await;
    let id = listed["data"][0]["id"].as_str().expect("id").to_owned();
    expect_status(
        app.send_json(
            reqwest::Method::PATCH,
            &format!("/workspace/operators/{id}"),
            &json!({"disabled": true}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        tab.get("/console/conversations").await.status,
        StatusCode::SEE_OTHER
    );
    assert_eq!(
        elsewhere.get("/console/conversations").await.status,
        StatusCode::SEE_OTHER
    );
    let refused = tab
        .post(
            "/console/sign-in",
            &[("email", "dee@acme.test"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    let _ = other.kill();
    let _ = other.wait();
}

#[tokio::test]
async fn signing_out_everywhere_ends_every_session_of_the_operator() {
    let app = spawn_app().await;
    let mut first = operator(&app, "eve@acme.test", "Eve", "agent").await;
    let mut second = Tab::new(&app);
    sign_in(&mut second, "eve@acme.test").await;
    let out = second
        .act(
            "/console/conversations",
            "/console/sign-out/everywhere",
            &[],
        )
        .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(
        out.location.as_deref(),
        Some("/console/sign-in?why=everywhere")
    );
    assert_eq!(
        first.get("/console/conversations").await.status,
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn too_many_attempts_on_one_account_are_slowed() {
    let app = spawn_app_with(|s| s.server.auth_failures_per_minute = 1000).await;
    operator(&app, "fay@acme.test", "Fay", "agent").await;
    let mut tab = Tab::new(&app);
    let mut last = StatusCode::OK;
    for _ in 0..6 {
        last = tab
            .post(
                "/console/sign-in",
                &[
                    ("email", "fay@acme.test"),
                    ("password", "wrong password 12"),
                ],
            )
            .await
            .status;
    }
    assert_eq!(last, StatusCode::TOO_MANY_REQUESTS);
    // Even the right password waits now: the account is slowed, whoever asks.
    let page = tab
        .post(
            "/console/sign-in",
            &[("email", "fay@acme.test"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(page.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(page.body.contains("Too many attempts for this account"));
}

/// The id of the only conversation, as the API lists it.
async fn only_conversation(app: &TestApp) -> String {
    let listed = expect_status(app.get("/conversations").await, 200).await;
    listed["data"][0]["id"].as_str().expect("id").to_owned()
}

#[tokio::test]
async fn operators_take_assign_note_search_and_send_saved_replies_and_their_name_stays_on_what_they_sent()
 {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    sheena_writes(&app, &channel, "wamid.ONE", "Where is my parcel 4417?").await;
    let id = only_conversation(&app).await;
    let page = format!("/console/conversations/{id}");
    let mut ana = operator(&app, "ana@acme.test", "Ana", "agent").await;
    let mut sam = operator(&app, "sam@acme.test", "Sam", "supervisor").await;

    // Taking over assigns the conversation to whoever took it.
    let taken = ana
        .act(&page, &format!("{page}/handoff"), &[("reason", "")])
        .await;
    assert_eq!(taken.status, StatusCode::SEE_OTHER, "{}", taken.body);
    let shown = ana.get(&page).await.body;
    assert!(shown.contains("Assigned to Ana"), "{shown}");
    let mine = ana.get("/console/conversations?assigned=mine").await.body;
    assert!(mine.contains(&id));
    let queue = ana
        .get("/console/conversations?assigned=unassigned")
        .await
        .body;
    assert!(!queue.contains(&id));

    // An agent may not give it to someone else; a supervisor may.
    let listed = expect_status(app.get("/workspace/operators").await, 200).await;
    let sam_id = listed["data"][1]["id"].as_str().expect("id").to_owned();
    let refused = ana
        .act(&page, &format!("{page}/assign"), &[("operator", &sam_id)])
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let moved = sam
        .act(&page, &format!("{page}/assign"), &[("operator", &sam_id)])
        .await;
    assert_eq!(moved.status, StatusCode::SEE_OTHER, "{}", moved.body);
    assert!(ana.get(&page).await.body.contains("Assigned to Sam"));

    // A note is kept for operators and never leaves.
    let sent_before = app.graph.sent_count();
    let noted = ana
        .act(
            &page,
            &format!("{page}/notes"),
            &[("text", "Secret: refund approved by finance")],
        )
        .await;
    assert_eq!(noted.status, StatusCode::SEE_OTHER);
    assert!(
        sam.get(&page)
            .await
            .body
            .contains("Secret: refund approved by finance")
    );
    assert_eq!(app.graph.sent_count(), sent_before);
    let history = expect_status(app.get(&format!("/conversations/{id}/messages")).await, 200).await;
    assert!(!history.to_string().contains("Secret: refund"));

    // A saved reply goes out by its shortcut; an unknown shortcut goes nowhere.
    let saved = ana
        .act(
            "/console/saved-replies",
            "/console/saved-replies",
            &[
                ("shortcut", "hours"),
                ("text", "We answer 9 to 5, Monday to Friday."),
            ],
        )
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    let unknown = ana
        .act(&page, &format!("{page}/reply"), &[("text", "/hurs")])
        .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert_eq!(app.graph.sent_count(), sent_before);
    let replied = ana
        .act(&page, &format!("{page}/reply"), &[("text", "/hours")])
        .await;
    assert_eq!(replied.status, StatusCode::SEE_OTHER, "{}", replied.body);
    let sent = app.wait_for_sends(sent_before + 1).await;
    let last = sent.last().expect("sent");
    assert_eq!(
        last.body["text"]["body"],
        "We answer 9 to 5, Monday to Friday."
    );
    // Who answered stays on the message.
    let shown = sam.get(&page).await.body;
    assert!(
        shown.contains(r#"<span class="by-operator">Ana</span>"#),
        "{shown}"
    );
    let history = expect_status(
        app.get(&format!("/conversations/{id}/messages?limit=100"))
            .await,
        200,
    )
    .await;
    let by_ana: Vec<&Value> = history["data"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["operator"]["name"] == "Ana")
        .collect();
    assert_eq!(by_ana.len(), 1, "{history}");
    assert_eq!(by_ana[0]["content"], "We answer 9 to 5, Monday to Friday.");
    let db = app.db().await;
    let row = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT COUNT(*) AS n FROM messages WHERE operator_id IS NOT NULL".to_owned(),
        ))
        .await
        .expect("query")
        .expect("row");
    assert_eq!(row.try_get::<i64>("", "n").expect("n"), 1);

    // Search finds the person by name and phone, and the conversation by what was said.
    for words in ["sheena", "6505551234", "PARCEL 4417"] {
        let found = ana
            .get(&format!(
                "/console/conversations?q={}",
                words.replace(' ', "+")
            ))
            .await;
        assert!(found.body.contains(&id), "{words}");
    }
    let none = ana.get("/console/conversations?q=nothing+like+it").await;
    assert!(none.body.contains("No conversations match."));
    let bad = ana.get("/console/conversations?assigned=someone").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn an_assignment_left_unanswered_returns_to_the_queue() {
    let app = spawn_app_with(|s| s.actors.handoff_sweep_ms = 50).await;
    let channel = app.live_channel(NUMBER).await;
    sheena_writes(&app, &channel, "wamid.ONE", "Hello?").await;
    let id = only_conversation(&app).await;
    let page = format!("/console/conversations/{id}");
    let mut ana = operator(&app, "ana@acme.test", "Ana", "agent").await;
    let taken = ana
        .act(&page, &format!("{page}/assign"), &[("operator", "me")])
        .await;
    assert_eq!(taken.status, StatusCode::SEE_OTHER, "{}", taken.body);
    assert!(ana.get(&page).await.body.contains("Assigned to Ana"));

    // The assistant's default assignment_timeout_minutes is 30: as if it was long ago.
    let db = app.db().await;
    db.execute_unprepared("UPDATE conversations SET assigned_at = '2020-01-01T00:00:00+00:00'")
        .await
        .expect("aged");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if ana.get(&page).await.body.contains("Assigned to no one") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never returned");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_events_of_an_assignment_and_of_an_operators_message_name_the_operator() {
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    let receiver = Receiver::start().await;
    endpoint(
        &app,
        &receiver.url,
        json!(["conversation.assigned", "message.sent"]),
    )
    .await;
    sheena_writes(&app, &channel, "wamid.ONE", "Hi").await;
    let id = only_conversation(&app).await;
    let page = format!("/console/conversations/{id}");
    let mut ana = operator(&app, "ana@acme.test", "Ana", "agent").await;
    let taken = ana
        .act(&page, &format!("{page}/handoff"), &[("reason", "")])
        .await;
    assert_eq!(taken.status, StatusCode::SEE_OTHER, "{}", taken.body);
    let sent = app.graph.sent_count();
    let replied = ana
        .act(&page, &format!("{page}/reply"), &[("text", "Ana here")])
        .await;
    assert_eq!(replied.status, StatusCode::SEE_OTHER, "{}", replied.body);
    app.wait_for_sends(sent + 1).await;

    // The assistant's reply, the assignment, the operator's reply.
    receiver.wait_for(3).await;
    let assigned = receiver.of("conversation.assigned");
    assert_eq!(assigned.len(), 1);
    let data = &assigned[0].json()["data"];
    assert_eq!(data["operator"]["name"], "Ana");
    assert_eq!(data["why"], "assigned");
    assert_eq!(data["conversation_id"], id.as_str());
    let by_ana: Vec<Value> = receiver
        .of("message.sent")
        .iter()
        .map(|r| r.json()["data"].clone())
        .filter(|d| !d["operator"].is_null())
        .collect();
    assert_eq!(by_ana.len(), 1, "one message of Ana's");
    assert_eq!(by_ana[0]["operator"]["name"], "Ana");
}

#[tokio::test]
async fn a_long_conversation_is_read_back_a_page_at_a_time() {
    use parley_persistence::conversations::{self, NewMessage};
    let app = spawn_app().await;
    let channel = app.live_channel(NUMBER).await;
    sheena_writes(&app, &channel, "wamid.ONE", "The very first words").await;
    let id = only_conversation(&app).await;
    // 250 more of the person's messages: with the first two, 252 in all.
    let db = app.db().await;
    let found = conversations::find_in_any_workspace(&db, id.parse().expect("uuid"))
        .await
        .expect("read")
        .expect("the conversation");
    for n in 0..250 {
        let at = parley_persistence::clock::now();
        conversations::append_message(
            &db,
            &found,
            NewMessage::from_person(format!("line {n}")),
            at,
        )
        .await
        .expect("stored");
    }
    let mut tab = operator(&app, "ana@acme.test", "Ana", "agent").await;

    // The page shows the newest 200 and a link to the older ones.
    let newest = tab.get(&format!("/console/conversations/{id}")).await.body;
    assert!(newest.contains("line 249") && newest.contains("line 50"));
    assert!(!newest.contains("line 49<") && !newest.contains("The very first words"));
    let (_, rest) = newest
        .split_once(r#"id="older" href=""#)
        .expect("an older link");
    let older = rest.split('"').next().expect("href").replace("&#x3d;", "=");
    let page = tab.get(&older).await;
    assert_eq!(page.status, StatusCode::OK, "{older}: {}", page.body);
    assert!(page.body.contains("The very first words") && page.body.contains("line 49"));
    assert!(!page.body.contains("line 50<"));
    assert!(
        !page.body.contains(r#"id="older""#),
        "the oldest page links no further"
    );

    let bad = tab
        .get(&format!("/console/conversations/{id}/history?before=nope"))
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn an_admin_invites_and_disables_operators_from_the_console_and_operators_cannot() {
    let app = spawn_app().await;
    let mut admin = Tab::new(&app);
    admin.sign_in(&app.owner.api_key).await;
    let invited = admin
        .act(
            "/console/operators",
            "/console/operators",
            &[
                ("email", "gus@acme.test"),
                ("name", "Gus"),
                ("role", "agent"),
            ],
        )
        .await;
    assert_eq!(invited.status, StatusCode::OK, "{}", invited.body);
    let (_, rest) = invited
        .body
        .split_once(r#"id="invitation-link" href=""#)
        .expect("the link on the page");
    let url = rest.split('"').next().expect("href");
    let link = &url[url.find("/console/").expect("path")..];
    let mut gus = Tab::new(&app);
    let set = gus
        .post(
            link,
            &[
                ("name", "Gus"),
                ("password", PASSWORD),
                ("confirm", PASSWORD),
            ],
        )
        .await;
    assert_eq!(set.status, StatusCode::SEE_OTHER, "{}", set.body);
    sign_in(&mut gus, "gus@acme.test").await;

    // An operator's session may not manage operators.
    assert_eq!(
        gus.get("/console/operators").await.status,
        StatusCode::FORBIDDEN
    );
    let twice = admin
        .act(
            "/console/operators",
            "/console/operators",
            &[("email", "GUS@acme.test"), ("name", ""), ("role", "agent")],
        )
        .await;
    assert_eq!(twice.status, StatusCode::CONFLICT);
    let bad = admin
        .act(
            "/console/operators",
            "/console/operators",
            &[("email", "nobody"), ("name", ""), ("role", "chief")],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);

    let listed = expect_status(app.get("/workspace/operators").await, 200).await;
    let id = listed["data"][0]["id"].as_str().expect("id").to_owned();
    let disabled = admin
        .act(
            "/console/operators",
            &format!("/console/operators/{id}/disable"),
            &[],
        )
        .await;
    assert_eq!(disabled.status, StatusCode::SEE_OTHER);
    assert_eq!(
        gus.get("/console/conversations").await.status,
        StatusCode::SEE_OTHER
    );
    let page = admin.get("/console/operators").await.body;
    assert!(page.contains("<td>disabled</td>"), "{page}");
}
