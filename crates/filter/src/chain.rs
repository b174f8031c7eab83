//! The milters of one SMTP session, in order (docs/spam.md 4): each step goes to every
//! filter still listening, and the first that refuses decides. A filter that cannot be
//! reached or does not answer in time costs at most its timeout, is counted
//! (`mailstow_milter_errors_total{filter}`), and its default action applies: `tempfail`
//! refuses the step with 451, `accept` leaves that filter out for the rest of the session.

use std::sync::Arc;

use crate::milter::{
    ConnectInfo, Decision, DefaultAction, MilterConfig, MilterSession, Modification,
};

/// What the session should answer to a step.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Continue,
    /// Refused for good: the filter's reply, or 550 5.7.1.
    Reject(Refusal),
    /// Refused for now: the filter's reply, or 451 4.7.1.
    TempFail(Refusal),
    /// Accept the message and drop it.
    Discard,
}

/// A reply the shell turns into its protocol's.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub code: u16,
    pub enhanced: (u8, u16, u16),
    pub text: String,
    /// The filter that refused.
    pub filter: String,
}

/// The end of a message through every filter.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ending {
    pub modifications: Vec<Modification>,
    /// A filter asked to quarantine it (delivered to Junk), with its reason.
    pub quarantine: Option<String>,
}

struct Slot {
    config: Arc<MilterConfig>,
    session: Option<MilterSession>,
    /// The filter accepted the current message: no more calls for it.
    accepted: bool,
}

/// The filters of one session.
pub struct Milters {
    slots: Vec<Slot>,
    telemetry: Arc<telemetry::Telemetry>,
}

impl Milters {
    /// Connects to every filter (in order) and tells it of the client. An empty list gives
    /// a chain that continues at every step.
    pub async fn open(
        configs: &[Arc<MilterConfig>],
        info: &ConnectInfo,
        telemetry: Arc<telemetry::Telemetry>,
    ) -> (Milters, Step) {
        let mut milters = Milters {
            slots: Vec::with_capacity(configs.len()),
            telemetry,
        };
        let mut step = Step::Continue;
        for config in configs {
            let mut slot = Slot {
                config: config.clone(),
                session: None,
                accepted: false,
            };
            if step == Step::Continue {
                match MilterSession::open(config.clone(), info).await {
                    Ok((session, decision)) => {
                        slot.session = Some(session);
                        step = decide(&mut slot, decision);
                    }
                    Err(e) => step = fail(&milters.telemetry, &mut slot, "connect", &e.to_string()),
                }
            }
            milters.slots.push(slot);
        }
        (milters, step)
    }

    pub fn is_empty(&self) -> bool {
        self.slots.iter().all(|s| s.session.is_none())
    }

    pub async fn helo(&mut self, name: &str) -> Step {
        self.each(Call::Helo(name)).await
    }

    pub async fn mail(&mut self, from: &str, macros: &[(&str, &str)]) -> Step {
        for slot in &mut self.slots {
            slot.accepted = false;
        }
        self.each(Call::Mail(from, macros)).await
    }

    pub async fn rcpt(&mut self, to: &str, macros: &[(&str, &str)]) -> Step {
        self.each(Call::Rcpt(to, macros)).await
    }

    /// The message through every filter; their modifications are applied in order by the
    /// caller (`milter::apply`), each filter seeing the message as it arrived (as Postfix
    /// does).
    pub async fn message(&mut self, message: &[u8]) -> (Step, Ending) {
        let mut ending = Ending::default();
        for slot in &mut self.slots {
            if slot.accepted {
                continue;
            }
            let Some(session) = slot.session.as_mut() else {
                continue;
            };
            let step = match session.message(message).await {
                Ok((decision, modifications)) => {
                    for m in modifications {
                        if let Modification::Quarantine(reason) = &m {
                            ending.quarantine = Some(reason.clone());
                        } else {
                            ending.modifications.push(m);
                        }
                    }
                    if let Decision::Quarantine(reason) = &decision {
                        ending.quarantine = Some(reason.clone());
                    }
                    decide(slot, decision)
                }
                Err(e) => fail(&self.telemetry, slot, "eom", &e.to_string()),
            };
            if step != Step::Continue {
                return (step, ending);
            }
        }
        (Step::Continue, ending)
    }

    /// The transaction ended (RSET, a new MAIL, the reply after the data): filters forget it.
    pub async fn abort(&mut self) {
        for slot in &mut self.slots {
            slot.accepted = false;
            if let Some(session) = slot.session.as_mut()
                && let Err(e) = session.abort().await
            {
                // Only the connection is lost; nothing was being decided.
                self.telemetry
                    .milter_error(&slot.config.name, "abort", &e.to_string(), "none");
                slot.session = None;
            }
        }
    }

    pub async fn quit(self) {
        for slot in self.slots {
            if let Some(session) = slot.session {
                session.quit().await;
            }
        }
    }

    async fn each(&mut self, call: Call<'_>) -> Step {
        for slot in &mut self.slots {
            if slot.accepted {
                continue;
            }
            let Some(session) = slot.session.as_mut() else {
                continue;
            };
            let result = match call {
                Call::Helo(name) => session.helo(name).await,
                Call::Mail(from, macros) => session.mail(from, &[], macros).await,
                Call::Rcpt(to, macros) => session.rcpt(to, &[], macros).await,
            };
            let step = match result {
                Ok(decision) => decide(slot, decision),
                Err(e) => fail(&self.telemetry, slot, call.name(), &e.to_string()),
            };
            if step != Step::Continue {
                return step;
            }
        }
        Step::Continue
    }
}

#[derive(Clone, Copy)]
enum Call<'a> {
    Helo(&'a str),
    Mail(&'a str, &'a [(&'a str, &'a str)]),
    Rcpt(&'a str, &'a [(&'a str, &'a str)]),
}

impl Call<'_> {
    fn name(&self) -> &'static str {
        match self {
            Call::Helo(_) => "helo",
            Call::Mail(..) => "mail",
            Call::Rcpt(..) => "rcpt",
        }
    }
}

fn decide(slot: &mut Slot, decision: Decision) -> Step {
    let name = slot.config.name.clone();
    match decision {
        Decision::Continue | Decision::Quarantine(_) => Step::Continue,
        Decision::Accept => {
            slot.accepted = true;
            Step::Continue
        }
        Decision::Discard => Step::Discard,
        Decision::Reject(reply) => Step::Reject(refusal(reply, 550, (5, 7, 1), &name)),
        Decision::TempFail(reply) => Step::TempFail(refusal(reply, 451, (4, 7, 1), &name)),
    }
}

fn fail(
    telemetry: &telemetry::Telemetry,
    slot: &mut Slot,
    step: &'static str,
    error: &str,
) -> Step {
    let name = slot.config.name.clone();
    slot.session = None;
    match slot.config.default_action {
        DefaultAction::Accept => {
            telemetry.milter_error(&name, step, error, "accept");
            Step::Continue
        }
        DefaultAction::TempFail => {
            telemetry.milter_error(&name, step, error, "tempfail");
            Step::TempFail(Refusal {
                code: 451,
                enhanced: (4, 7, 1),
                text: format!("content filter {name} unavailable, try again later"),
                filter: name,
            })
        }
    }
}

fn refusal(
    reply: Option<crate::milter::Reply>,
    code: u16,
    enhanced: (u8, u16, u16),
    filter: &str,
) -> Refusal {
    match reply {
        Some(r) if (r.code / 100 == code / 100) => Refusal {
            code: r.code,
            enhanced: r.enhanced.unwrap_or(enhanced),
            text: r.text,
            filter: filter.to_string(),
        },
        _ => Refusal {
            code,
            enhanced,
            text: if code >= 500 {
                format!("message refused by content filter {filter}")
            } else {
                format!("message deferred by content filter {filter}, try again later")
            },
            filter: filter.to_string(),
        },
    }
}
