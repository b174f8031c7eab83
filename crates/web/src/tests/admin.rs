//! The admin pages over the in-memory backend: admins only, CSRF tokens, the actions, and
//! the Reports section (escaping, the certificate).

use super::*;

#[tokio::test]
async fn admin_pages_are_for_admins_with_a_token() {
    let memory = mailbox();
    let mut ann = Browser::new(memory.clone());
    ann.log_in("ann@example.org").await;
    for uri in [
        "/admin",
        "/admin/users",
        "/admin/queue",
        "/admin/queue/show?id=42",
    ] {
        assert_eq!(
            ann.send("GET", uri, None).await.status,
            StatusCode::FORBIDDEN,
            "{uri}"
        );
    }
    let token = ann.csrf("/account").await;
    let a = ann
        .send(
            "POST",
            "/admin/users/add",
            Some(&format!("csrf={token}&address=x%40example.org&password=p")),
        )
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert!(
        !ann.send("GET", "/account", None)
            .await
            .body
            .contains("/admin")
    );

    let mut root = Browser::new(memory.clone());
    root.log_in("root@example.org").await;
    assert!(
        root.send("GET", "/account", None)
            .await
            .body
            .contains("href=\"/admin\"")
    );
    let users = root.send("GET", "/admin/users", None).await;
    assert_eq!(users.status, StatusCode::OK);
    assert!(users.body.contains("id=\"add-user\""), "{}", users.body);
    // Without the token: refused, nothing done.
    let a = root
        .send(
            "POST",
            "/admin/users/add",
            Some("address=x%40example.org&password=p"),
        )
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert!(memory.acted.lock().unwrap().is_empty());
    let token = root.csrf("/admin/users").await;
    let a = root
        .send(
            "POST",
            "/admin/users/add",
            Some(&format!(
                "csrf={token}&address=carol%40example.org&password=p&quota=500M&admin=on"
            )),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert!(a.body.contains("user added: carol@example.org"));
    assert!(
        a.body
            .contains("<td class=\"address\">carol@example.org</td>")
    );
    assert_eq!(
        memory.acted.lock().unwrap()[0],
        (
            "root@example.org".to_string(),
            AdminAction::AddUser {
                address: "carol@example.org".into(),
                password: "p".into(),
                quota_bytes: Some(500 << 20),
                admin: true
            }
        )
    );
    // A refusal is shown as one, with a 400.
    let a = root
        .send(
            "POST",
            "/admin/domains/delete",
            Some(&format!("csrf={token}&name=example.org")),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.body.contains("domain example.org still has users"));
    // Not against themself.
    let a = root
        .send(
            "POST",
            "/admin/users/delete",
            Some(&format!("csrf={token}&address=Root%40example.org")),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        memory.acted.lock().unwrap().len(),
        2,
        "the delete never reached the backend"
    );
    let a = root
        .send(
            "POST",
            "/admin/users/quota",
            Some(&format!(
                "csrf={token}&address=ann%40example.org&quota=lots"
            )),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.body.contains("is not a size"), "{}", a.body);
    // The queue: escaped, with its actions.
    let q = root.send("GET", "/admin/queue", None).await;
    assert!(
        q.body.contains("&#60;script&#62;@example.org"),
        "{}",
        q.body
    );
    assert!(!q.body.contains("<script>@"));
    assert_eq!(
        root.send("GET", "/admin/queue/show?id=42", None)
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        root.send("GET", "/admin/queue/show?id=43", None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let a = root
        .send(
            "POST",
            "/admin/queue/retry",
            Some(&format!("csrf={token}&id=42")),
        )
        .await;
    assert!(a.body.contains("queue retry 42"), "{}", a.body);
    assert_eq!(
        root.send("GET", "/admin/nothing", None).await.status,
        StatusCode::NOT_FOUND
    );
    assert!(
        root.send("GET", "/admin/counters", None)
            .await
            .body
            .contains("mailstow_accepted_total")
    );

    // The right taken away: the next request is refused.
    memory.admins.lock().unwrap().clear();
    assert_eq!(
        root.send("GET", "/admin", None).await.status,
        StatusCode::FORBIDDEN
    );
}

/// The reports page: received and sent reports and the certificate, escaped, each received
/// report linked to its text; for admins only, read-only.
#[tokio::test]
async fn the_reports_page_lists_reports_escaped_and_the_certificate() {
    let memory = mailbox();
    let mut ann = Browser::new(memory.clone());
    ann.log_in("ann@example.org").await;
    for uri in ["/admin/reports", "/admin/reports/show?id=7"] {
        let a = ann.send("GET", uri, None).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{uri}");
        assert!(!a.body.contains("alert(1)"), "{uri}");
    }

    let mut root = Browser::new(memory.clone());
    root.log_in("root@example.org").await;
    let page = root.send("GET", "/admin/reports", None).await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    assert!(
        body.contains(r#"href="/admin/reports">Reports</a>"#),
        "{body}"
    );
    assert!(!body.contains("<script>"), "{body}");
    assert!(
        body.contains("&#60;script&#62;alert(1)&#60;/script&#62; &#38; Co"),
        "{body}"
    );
    assert!(body.contains("r&#34;1"), "{body}");
    assert!(
        body.contains(r#"<a href="/admin/reports/show?id=7">7</a>"#),
        "{body}"
    );
    assert!(body.contains("120 sessions, 3 failed"), "{body}");
    assert!(
        body.contains("2025-11-25 00:00 – 2025-11-25 23:59"),
        "{body}"
    );
    assert!(
        body.contains("<td>DMARC</td><td>example.net</td><td>2025-11-25</td><td>dmarc@example.net</td><td>2025-11-26 01:00</td>"),
        "{body}"
    );
    assert!(body.contains("self-signed or configured"), "{body}");
    assert!(!body.contains("Showing the newest"), "{body}");
    assert!(!body.contains("<form method=\"post\" action=\"/admin/reports"));

    // Cut lists say so; a domain that asks for no report; an ACME certificate.
    {
        let mut reports = memory.reports.lock().unwrap();
        reports.received_more = true;
        reports.sent[0].recipients.clear();
        reports.certificate = AdminCertificate::Acme {
            names: vec!["mail.example.org".into(), "mta-sts.example.org".into()],
            not_after: Some(1_771_891_200),
            days_left: Some(89),
            last_error: Some("<b>rate limited</b>".into()),
            consecutive_failures: 2,
            next_attempt: Some(1_764_122_400),
            renewing: true,
        };
    }
    let body = root.send("GET", "/admin/reports", None).await.body;
    assert!(
        body.contains("Showing the newest 100; <code>mailstow report list</code>"),
        "{body}"
    );
    assert!(!body.contains("report list --sent</code> shows"), "{body}");
    assert!(
        body.contains("none (the domain asks for no report)"),
        "{body}"
    );
    assert!(
        body.contains("<dd>mail.example.org, mta-sts.example.org</dd>"),
        "{body}"
    );
    assert!(body.contains("(89 days left)"), "{body}");
    assert!(
        body.contains("&#60;b&#62;rate limited&#60;/b&#62; (2 failures in a row)"),
        "{body}"
    );
    assert!(body.contains("<dd>2025-11-26 02:00</dd>"), "{body}");

    // Empty lists.
    {
        let mut reports = memory.reports.lock().unwrap();
        reports.received.clear();
        reports.sent.clear();
        reports.certificate = AdminCertificate::Unreadable("state.json: corrupt".into());
    }
    let body = root.send("GET", "/admin/reports", None).await.body;
    assert!(body.contains("No report received."), "{body}");
    assert!(body.contains("No report sent."), "{body}");
    assert!(
        body.contains("ACME directory unreadable: state.json: corrupt"),
        "{body}"
    );

    // One report's text, escaped; an unknown id is a 404.
    let detail = root.send("GET", "/admin/reports/show?id=7", None).await;
    assert_eq!(detail.status, StatusCode::OK);
    assert!(
        detail.body.contains(
            "<pre class=\"report\">id: 7\nfrom: &#60;script&#62;alert(1)&#60;/script&#62; &#38; Co\n</pre>"
        ),
        "{}",
        detail.body
    );
    assert_eq!(
        root.send("GET", "/admin/reports/show?id=8", None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}
