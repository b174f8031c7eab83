//! The Rules pages over the in-memory backend: the form, hand-written scripts, the text
//! editor's bounds.

use super::*;

/// `application/x-www-form-urlencoded` of `fields`.
fn encoded(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(k, v)| {
            let v: String = v
                .bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect();
            format!("{k}={v}")
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn script_of(m: &Memory, user: &str, name: &str) -> Option<(String, bool)> {
    m.scripts
        .lock()
        .unwrap()
        .get(&(user.to_string(), name.to_string()))
        .cloned()
}

#[tokio::test]
async fn the_rules_form_stores_an_active_script_and_shows_it_again() {
    let memory = mailbox();
    let mut b = Browser::new(memory.clone());
    assert_eq!(
        b.send("GET", "/rules", None).await.headers[header::LOCATION],
        "/login"
    );
    b.log_in("ann@example.org").await;
    let a = b.send("GET", "/rules", None).await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(a.body.contains("No rules yet."), "{}", a.body);
    assert!(
        b.send("GET", "/account", None)
            .await
            .body
            .contains("href=\"/rules\"")
    );
    let csrf = b.csrf("/rules/rule").await;
    let rule = [
        ("csrf", csrf.as_str()),
        ("index", "new"),
        ("name", "Bills <b>"),
        ("match", "all"),
        ("cond_field_0", "subject"),
        ("cond_op_0", "contains"),
        ("cond_value_0", "invoice \"42\""),
        ("act_kind_0", "move"),
        ("act_arg_0", "Invoices"),
        ("act_create_0", "on"),
    ];
    // Without the token: refused, nothing stored.
    let a = b
        .send("POST", "/rules/rule", Some(&encoded(&rule[1..])))
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert!(script_of(&memory, "ann@example.org", "mailstow-rules").is_none());
    let a = b.send("POST", "/rules/rule", Some(&encoded(&rule))).await;
    assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
    let (source, active) = script_of(&memory, "ann@example.org", "mailstow-rules").unwrap();
    assert!(active);
    assert!(
        source.contains("if header :contains \"subject\" \"invoice \\\"42\\\"\" {\r\n    fileinto :create \"Invoices\";"),
        "{source}"
    );
    let a = b.send("GET", "/rules", None).await;
    assert!(
        a.body
            .contains("If Subject contains “invoice &#34;42&#34;”: move to Invoices"),
        "{}",
        a.body
    );
    assert!(a.body.contains("Bills &#60;b&#62;"), "{}", a.body);
    assert!(!a.body.contains("<b>"), "{}", a.body);
    // Edit shows it in the form.
    let a = b.send("GET", "/rules/rule?index=0", None).await;
    assert!(
        a.body.contains("value=\"invoice &#34;42&#34;\""),
        "{}",
        a.body
    );
    assert!(
        a.body.contains("<option value=\"move\" selected>"),
        "{}",
        a.body
    );

    // A second rule, then reorder and delete.
    let second = [
        ("csrf", csrf.as_str()),
        ("index", "new"),
        ("cond_field_0", "size"),
        ("cond_op_0", "over"),
        ("cond_value_0", "500"),
        ("act_kind_0", "discard"),
    ];
    let a = b.send("POST", "/rules/rule", Some(&encoded(&second))).await;
    assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
    let order = encoded(&[("csrf", &csrf), ("index", "1"), ("dir", "up")]);
    assert_eq!(
        b.send("POST", "/rules/order", Some(&order)).await.status,
        StatusCode::SEE_OTHER
    );
    let (source, _) = script_of(&memory, "ann@example.org", "mailstow-rules").unwrap();
    assert!(
        source.find("size :over 500K").unwrap() < source.find("invoice").unwrap(),
        "{source}"
    );
    let delete = encoded(&[("csrf", &csrf), ("index", "0")]);
    b.send("POST", "/rules/delete", Some(&delete)).await;
    let (source, _) = script_of(&memory, "ann@example.org", "mailstow-rules").unwrap();
    assert!(!source.contains("size :over"), "{source}");

    // A refused rule: the form again with the reason, what was typed kept.
    let bad = [
        ("csrf", csrf.as_str()),
        ("index", "0"),
        ("cond_field_0", "subject"),
        ("cond_op_0", "contains"),
        ("cond_value_0", "kept text"),
        ("act_kind_0", "forward"),
        ("act_arg_0", "not an address"),
    ];
    let a = b.send("POST", "/rules/rule", Some(&encoded(&bad))).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.body.contains("is not a mail address"), "{}", a.body);
    assert!(a.body.contains("value=\"kept text\""), "{}", a.body);

    // The out-of-office reply.
    let vacation = [
        ("csrf", csrf.as_str()),
        ("enabled", "on"),
        ("start", "2025-07-01"),
        ("end", "2025-07-14"),
        ("subject", "Away"),
        ("text", "Gone.\r\n.\r\nBack soon."),
        ("days", "3"),
        ("addresses", ""),
    ];
    let a = b
        .send("POST", "/rules/vacation", Some(&encoded(&vacation)))
        .await;
    assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
    let (source, _) = script_of(&memory, "ann@example.org", "mailstow-rules").unwrap();
    assert!(
        source.contains(
            "vacation :days 3 :subject \"Away\" text:\r\nGone.\r\n..\r\nBack soon.\r\n.\r\n;"
        ),
        "{source}"
    );
    assert!(
        source.contains("currentdate :value \"ge\" \"date\" \"2025-07-01\""),
        "{source}"
    );
    let a = b.send("GET", "/rules", None).await;
    assert!(a.body.contains("value=\"2025-07-14\""), "{}", a.body);
    let mut late = vacation;
    late[3] = ("end", "2025-06-01");
    let a = b
        .send("POST", "/rules/vacation", Some(&encoded(&late)))
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(
        a.body.contains("the end date is before the start date"),
        "{}",
        a.body
    );
    assert!(a.body.contains("value=\"2025-06-01\""), "{}", a.body);
}

#[tokio::test]
async fn a_hand_written_script_is_read_only_and_edited_as_text() {
    let memory = mailbox();
    let mut b = Browser::new(memory.clone());
    b.log_in("ann@example.org").await;
    let csrf = b.csrf("/rules").await;
    // A new script by hand; an error comes back with its line and column.
    let bad = encoded(&[
        ("csrf", &csrf),
        ("new", "1"),
        ("name", "mine"),
        ("source", "keep;\r\nsyntax error <script>\r\n"),
        ("activate", "on"),
    ]);
    let a = b.send("POST", "/rules/script", Some(&bad)).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(
        a.body.contains("Line 2, column 1: unexpected syntax error"),
        "{}",
        a.body
    );
    assert!(
        a.body.contains("syntax error &#60;script&#62;"),
        "{}",
        a.body
    );
    assert!(script_of(&memory, "ann@example.org", "mine").is_none());
    let good = encoded(&[
        ("csrf", &csrf),
        ("new", "1"),
        ("name", "mine"),
        (
            "source",
            "require \"fileinto\";\r\nfileinto \"<Archive>\";\r\n",
        ),
        ("activate", "on"),
    ]);
    assert_eq!(
        b.send("POST", "/rules/script", Some(&good)).await.status,
        StatusCode::SEE_OTHER
    );
    assert!(script_of(&memory, "ann@example.org", "mine").unwrap().1);
    // A new script of the same name does not replace it.
    let again = good.replace("fileinto", "discard%3B%23");
    let a = b.send("POST", "/rules/script", Some(&again)).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.body.contains("exists already"), "{}", a.body);
    assert!(
        !script_of(&memory, "ann@example.org", "mine")
            .unwrap()
            .0
            .contains("discard")
    );
    let a = b.send("GET", "/rules", None).await;
    assert!(a.body.contains("id=\"readonly\""), "{}", a.body);
    assert!(
        a.body.contains("fileinto &#34;&#60;Archive&#62;&#34;;"),
        "{}",
        a.body
    );
    assert!(
        a.body.contains("href=\"/rules/script?name=mine\""),
        "{}",
        a.body
    );
    assert!(!a.body.contains("action=\"/rules/vacation\""), "{}", a.body);
    let a = b.send("GET", "/rules/script?name=mine", None).await;
    assert!(
        a.body.contains("fileinto &#34;&#60;Archive&#62;&#34;;"),
        "{}",
        a.body
    );
    // The form cannot overwrite it.
    let rule = encoded(&[("csrf", &csrf), ("index", "new"), ("act_kind_0", "flag")]);
    assert_eq!(
        b.send("POST", "/rules/rule", Some(&rule)).await.status,
        StatusCode::CONFLICT
    );
    // An active script is not deleted; deactivated, it is, and the form is back.
    let delete = encoded(&[("csrf", &csrf), ("name", "mine")]);
    assert_eq!(
        b.send("POST", "/rules/script/delete", Some(&delete))
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    let none = encoded(&[("csrf", &csrf), ("name", "")]);
    b.send("POST", "/rules/activate", Some(&none)).await;
    assert!(!script_of(&memory, "ann@example.org", "mine").unwrap().1);
    let a = b.send("GET", "/rules", None).await;
    assert!(a.body.contains("action=\"/rules/vacation\""), "{}", a.body);
    assert_eq!(
        b.send("POST", "/rules/script/delete", Some(&delete))
            .await
            .status,
        StatusCode::SEE_OTHER
    );
    assert!(script_of(&memory, "ann@example.org", "mine").is_none());
    // The form's own script, edited by hand, is shown read-only too.
    assert_eq!(
        b.send("POST", "/rules/rule", Some(&rule)).await.status,
        StatusCode::SEE_OTHER
    );
    let (source, _) = script_of(&memory, "ann@example.org", "mailstow-rules").unwrap();
    let edited = encoded(&[
        ("csrf", &csrf),
        ("name", "mailstow-rules"),
        ("source", &format!("{source}# my note\r\n")),
        ("activate", "on"),
    ]);
    b.send("POST", "/rules/script", Some(&edited)).await;
    let a = b.send("GET", "/rules", None).await;
    assert!(a.body.contains("id=\"readonly\""), "{}", a.body);
    assert!(a.body.contains("# my note"), "{}", a.body);
    // Another user sees none of it.
    let mut bob = Browser::new(memory.clone());
    bob.log_in("bob@example.org").await;
    let a = bob.send("GET", "/rules", None).await;
    assert!(a.body.contains("No scripts."), "{}", a.body);
    assert_eq!(
        bob.send("GET", "/rules/script?name=mailstow-rules", None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn the_text_editor_takes_a_script_up_to_its_bound_however_encoded() {
    let memory = mailbox();
    let mut b = Browser::new(memory.clone());
    b.log_in("ann@example.org").await;
    let csrf = b.csrf("/rules").await;
    let max = Config::default().script_bytes_max;
    // Comments of `#`: every byte is 3 when encoded, far over web_request_bytes_max.
    let source = format!("#{}\r\nkeep;\r\n", "#".repeat(max - 10));
    let form = encoded(&[
        ("csrf", &csrf),
        ("new", "1"),
        ("name", "big"),
        ("source", &source),
    ]);
    assert!(form.len() > Config::default().request_bytes_max * 2);
    let a = b.send("POST", "/rules/script", Some(&form)).await;
    assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
    assert_eq!(
        script_of(&memory, "ann@example.org", "big").unwrap().0,
        source
    );
    let over = format!("{}keep;", " ".repeat(max));
    let form = encoded(&[("csrf", &csrf), ("name", "big"), ("source", &over)]);
    let a = b.send("POST", "/rules/script", Some(&form)).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(
        a.body.contains(&format!("more than the {max} bytes")),
        "{}",
        &a.body[..500]
    );
    // Other rules forms keep the small bound.
    let rule = encoded(&[
        ("csrf", &csrf),
        ("index", "new"),
        ("name", &"n".repeat(70_000)),
    ]);
    assert_eq!(
        b.send("POST", "/rules/rule", Some(&rule)).await.status,
        StatusCode::PAYLOAD_TOO_LARGE
    );
}
