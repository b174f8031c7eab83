//! The replies to one step, folded into its result: Postfix milter8.c `milter8_event`'s
//! reply loop, without the I/O.

use std::fmt;

use crate::decode::Response;
use crate::modify::Modification;
use crate::negotiate::Negotiated;
use crate::reply::Decision;
use crate::wire::{Stage, action};

/// Where a step stands after one more response.
#[derive(Clone, Debug, PartialEq)]
pub enum Fold {
    /// A modification or quarantine was taken; the final word is still to come.
    More,
    /// `SMFIR_PROGRESS`: still working; keep waiting (the wait's timer restarts).
    Progress,
    /// `SMFIR_SKIP`: go on, and send no more steps of this kind for this message (Postfix
    /// skips further events of the same type until another type is sent).
    Skip,
    /// The step's final word.
    Done(Decision),
}

/// A response that breaks the protocol at this step, or that ends the connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepError {
    /// `SMFIR_SHUTDOWN`.
    Shutdown,
    /// `SMFIR_CONN_FAIL`. Postfix treats it as a protocol error; so do we.
    ConnFail,
    /// A response that does not belong to this step (a modification before the end of the
    /// message, a negotiation packet after the negotiation).
    Unexpected {
        stage: Stage,
        response: &'static str,
    },
    /// A modification whose action the filter did not negotiate.
    NotNegotiated(&'static str),
    /// The modifications of one message took more than the bound.
    TooMuch { bytes_max: usize },
    /// Body replacement packets separated by other requests (Postfix milter8.c: "body
    /// replacement requests can't currently be mixed with other requests").
    BodyInterleaved,
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepError::Shutdown => write!(f, "the filter shut down (SMFIR_SHUTDOWN)"),
            StepError::ConnFail => write!(f, "the filter asked for a connection failure"),
            StepError::Unexpected { stage, response } => {
                write!(f, "unexpected {response} at step {stage:?}")
            }
            StepError::NotNegotiated(what) => {
                write!(f, "{what} without having negotiated that action")
            }
            StepError::TooMuch { bytes_max } => {
                write!(f, "modifications beyond {bytes_max} bytes")
            }
            StepError::BodyInterleaved => {
                write!(f, "body replacement packets mixed with other requests")
            }
        }
    }
}

impl std::error::Error for StepError {}

/// The replies to one step, as they arrive.
#[derive(Debug)]
pub struct Step {
    stage: Stage,
    actions: u32,
    leading_space: bool,
    quarantine: Option<String>,
    modifications: Vec<Modification>,
    bytes: usize,
    bytes_max: usize,
}

/// Bytes counted for each modification on top of its fields: the packet's length and code.
const PACKET_OVERHEAD: usize = 5;

impl Step {
    /// A step waiting for its replies. `modification_bytes_max` bounds what the filter's
    /// modifications may add up to (fields and packet overhead).
    pub fn new(stage: Stage, negotiated: &Negotiated, modification_bytes_max: usize) -> Step {
        Step {
            stage,
            actions: negotiated.actions,
            leading_space: negotiated.leading_space(),
            quarantine: None,
            modifications: Vec::new(),
            bytes: 0,
            bytes_max: modification_bytes_max,
        }
    }

    /// Takes one response.
    pub fn take(&mut self, response: Response) -> Result<Fold, StepError> {
        let decision = match response {
            Response::Progress => return Ok(Fold::Progress),
            Response::Skip => return Ok(Fold::Skip),
            Response::Continue => Decision::Continue,
            Response::Accept => Decision::Accept,
            Response::Reject => Decision::Reject(None),
            Response::TempFail => Decision::TempFail(None),
            Response::ReplyCode(reply) if reply.code >= 500 => Decision::Reject(Some(reply)),
            Response::ReplyCode(reply) => Decision::TempFail(Some(reply)),
            // Postfix milter8.c: "DISCARD action is not allowed for connect or helo".
            Response::Discard if self.stage.is_connection_level() => Decision::Continue,
            Response::Discard => Decision::Discard,
            Response::Shutdown => return Err(StepError::Shutdown),
            Response::ConnFail => return Err(StepError::ConnFail),
            Response::OptNeg { .. } => return Err(self.unexpected("SMFIC_OPTNEG")),
            Response::SetSymList { .. } => return Err(self.unexpected("SMFIR_SETSYMLIST")),
            Response::Quarantine(reason) => {
                // Postfix takes a quarantine at any step, and it holds for what follows.
                self.need(action::QUARANTINE, "SMFIR_QUARANTINE")?;
                self.count(reason.len())?;
                if self.stage == Stage::EndOfMessage {
                    self.modifications
                        .push(Modification::Quarantine(reason.clone()));
                }
                self.quarantine = Some(reason);
                return Ok(Fold::More);
            }
            modification => {
                self.modification(modification)?;
                return Ok(Fold::More);
            }
        };
        Ok(Fold::Done(decision))
    }

    /// The quarantine reason, if the filter asked for one in this step.
    pub fn quarantine(&self) -> Option<&str> {
        self.quarantine.as_deref()
    }

    /// The modifications taken, in the order they came.
    pub fn into_modifications(self) -> Vec<Modification> {
        self.modifications
    }

    fn unexpected(&self, response: &'static str) -> StepError {
        StepError::Unexpected {
            stage: self.stage,
            response,
        }
    }

    fn need(&self, action: u32, what: &'static str) -> Result<(), StepError> {
        if self.actions & action == 0 {
            return Err(StepError::NotNegotiated(what));
        }
        Ok(())
    }

    fn count(&mut self, bytes: usize) -> Result<(), StepError> {
        self.bytes = self
            .bytes
            .saturating_add(bytes)
            .saturating_add(PACKET_OVERHEAD);
        if self.bytes > self.bytes_max {
            return Err(StepError::TooMuch {
                bytes_max: self.bytes_max,
            });
        }
        Ok(())
    }

    /// A header value as written after the colon (milter8.c `MILTER8_HDR_SPACE`).
    fn value(&self, value: String) -> String {
        if self.leading_space || value.is_empty() {
            value
        } else {
            format!(" {value}")
        }
    }

    /// Modifications come only at the end of the message (Postfix milter8.c: any other
    /// request is "unexpected filter response"), each with its negotiated action.
    fn modification(&mut self, response: Response) -> Result<(), StepError> {
        let name = response_name(&response);
        if self.stage != Stage::EndOfMessage {
            return Err(self.unexpected(name));
        }
        let (needed, bytes) = match &response {
            Response::AddHeader { name, value } => (action::ADDHDRS, name.len() + value.len()),
            Response::InsertHeader { name, value, .. } => {
                (action::ADDHDRS, 4 + name.len() + value.len())
            }
            Response::ChangeHeader { name, value, .. } => {
                (action::CHGHDRS, 4 + name.len() + value.len())
            }
            Response::AddRecipient(address) => (action::ADDRCPT, address.len()),
            Response::AddRecipientPar { address, args } => (
                action::ADDRCPT_PAR,
                address.len() + args.as_ref().map_or(0, String::len),
            ),
            Response::DeleteRecipient(address) => (action::DELRCPT, address.len()),
            Response::ChangeFrom { address, args } => (
                action::CHGFROM,
                address.len() + args.as_ref().map_or(0, String::len),
            ),
            Response::ReplaceBody(piece) => (action::CHGBODY, piece.len()),
            _ => return Err(self.unexpected(name)),
        };
        self.need(needed, name)?;
        self.count(bytes)?;
        let modification = match response {
            Response::AddHeader { name, value } => Modification::AddHeader {
                name,
                value: self.value(value),
            },
            Response::InsertHeader { index, name, value } => Modification::InsertHeader {
                index,
                name,
                value: self.value(value),
            },
            Response::ChangeHeader { index, name, value } => Modification::ChangeHeader {
                // Postfix milter8.c: index 0 is taken as 1 (Sendmail compatibility).
                index: index.max(1),
                name,
                value: self.value(value),
            },
            Response::AddRecipient(address) | Response::AddRecipientPar { address, .. } => {
                Modification::AddRecipient(address)
            }
            Response::DeleteRecipient(address) => Modification::DeleteRecipient(address),
            Response::ChangeFrom { address, .. } => Modification::ChangeFrom(address),
            Response::ReplaceBody(piece) => return self.body(piece),
            _ => return Err(self.unexpected(name)),
        };
        self.modifications.push(modification);
        Ok(())
    }

    /// Joins consecutive body packets; a body packet after another request, once a body was
    /// started, is refused as Postfix refuses it.
    fn body(&mut self, piece: Vec<u8>) -> Result<(), StepError> {
        if let Some(Modification::ReplaceBody(body)) = self.modifications.last_mut() {
            body.extend_from_slice(&piece);
            return Ok(());
        }
        if self
            .modifications
            .iter()
            .any(|m| matches!(m, Modification::ReplaceBody(_)))
        {
            return Err(StepError::BodyInterleaved);
        }
        self.modifications.push(Modification::ReplaceBody(piece));
        Ok(())
    }
}

fn response_name(response: &Response) -> &'static str {
    match response {
        Response::AddHeader { .. } => "SMFIR_ADDHEADER",
        Response::InsertHeader { .. } => "SMFIR_INSHEADER",
        Response::ChangeHeader { .. } => "SMFIR_CHGHEADER",
        Response::AddRecipient(_) => "SMFIR_ADDRCPT",
        Response::AddRecipientPar { .. } => "SMFIR_ADDRCPT_PAR",
        Response::DeleteRecipient(_) => "SMFIR_DELRCPT",
        Response::ChangeFrom { .. } => "SMFIR_CHGFROM",
        Response::ReplaceBody(_) => "SMFIR_REPLBODY",
        _ => "a reply",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negotiate::Offer;
    use crate::reply::Reply;
    use crate::wire::protocol;

    fn negotiated(actions: u32, protocol: u32) -> Negotiated {
        Negotiated::new(&Offer::default(), 6, actions, protocol, &[]).unwrap()
    }

    fn step(stage: Stage) -> Step {
        Step::new(stage, &negotiated(action::ALL, 0), 1000)
    }

    #[test]
    fn final_words() {
        let reply = Reply {
            code: 451,
            enhanced: Some((4, 7, 1)),
            text: "later".into(),
        };
        for (response, decision) in [
            (Response::Continue, Decision::Continue),
            (Response::Accept, Decision::Accept),
            (Response::Reject, Decision::Reject(None)),
            (Response::TempFail, Decision::TempFail(None)),
            (Response::Discard, Decision::Discard),
            (
                Response::ReplyCode(reply.clone()),
                Decision::TempFail(Some(reply.clone())),
            ),
        ] {
            assert_eq!(step(Stage::Rcpt).take(response), Ok(Fold::Done(decision)));
        }
        let reject = Reply { code: 554, ..reply };
        assert_eq!(
            step(Stage::EndOfMessage).take(Response::ReplyCode(reject.clone())),
            Ok(Fold::Done(Decision::Reject(Some(reject))))
        );
        // Postfix: no discard at connect or HELO.
        assert_eq!(
            step(Stage::Connect).take(Response::Discard),
            Ok(Fold::Done(Decision::Continue))
        );
        assert_eq!(step(Stage::Body).take(Response::Skip), Ok(Fold::Skip));
        assert_eq!(
            step(Stage::Body).take(Response::Progress),
            Ok(Fold::Progress)
        );
        assert_eq!(
            step(Stage::Body).take(Response::Shutdown),
            Err(StepError::Shutdown)
        );
    }

    #[test]
    fn modifications_only_at_the_end_of_the_message() {
        let add = Response::AddHeader {
            name: "X-A".into(),
            value: "v".into(),
        };
        assert!(matches!(
            step(Stage::Rcpt).take(add.clone()),
            Err(StepError::Unexpected { .. })
        ));
        let mut end = step(Stage::EndOfMessage);
        assert_eq!(end.take(add), Ok(Fold::More));
        assert_eq!(
            end.take(Response::ChangeHeader {
                index: 0,
                name: "Subject".into(),
                value: String::new()
            }),
            Ok(Fold::More)
        );
        assert_eq!(end.take(Response::Accept), Ok(Fold::Done(Decision::Accept)));
        assert_eq!(
            end.into_modifications(),
            vec![
                Modification::AddHeader {
                    name: "X-A".into(),
                    value: " v".into()
                },
                Modification::ChangeHeader {
                    index: 1,
                    name: "Subject".into(),
                    value: String::new()
                },
            ]
        );
    }

    #[test]
    fn leading_space_negotiated_keeps_values_as_sent() {
        let mut end = Step::new(
            Stage::EndOfMessage,
            &negotiated(action::ALL, protocol::HDR_LEADSPC),
            1000,
        );
        end.take(Response::InsertHeader {
            index: 0,
            name: "X-A".into(),
            value: "v".into(),
        })
        .unwrap();
        assert_eq!(
            end.into_modifications(),
            vec![Modification::InsertHeader {
                index: 0,
                name: "X-A".into(),
                value: "v".into()
            }]
        );
    }

    #[test]
    fn actions_must_have_been_negotiated() {
        let mut end = Step::new(Stage::EndOfMessage, &negotiated(action::ADDHDRS, 0), 1000);
        assert_eq!(
            end.take(Response::ReplaceBody(b"x".to_vec())),
            Err(StepError::NotNegotiated("SMFIR_REPLBODY"))
        );
        assert_eq!(
            end.take(Response::Quarantine("x".into())),
            Err(StepError::NotNegotiated("SMFIR_QUARANTINE"))
        );
    }

    #[test]
    fn body_pieces_join_and_may_not_interleave() {
        let mut end = step(Stage::EndOfMessage);
        end.take(Response::ReplaceBody(b"a".to_vec())).unwrap();
        end.take(Response::ReplaceBody(b"b".to_vec())).unwrap();
        end.take(Response::AddRecipient("<c@x>".into())).unwrap();
        assert_eq!(
            end.take(Response::ReplaceBody(b"c".to_vec())),
            Err(StepError::BodyInterleaved)
        );
        assert_eq!(
            end.into_modifications(),
            vec![
                Modification::ReplaceBody(b"ab".to_vec()),
                Modification::AddRecipient("<c@x>".into()),
            ]
        );
    }

    #[test]
    fn quarantine_is_taken_at_any_step_and_kept() {
        let mut rcpt = step(Stage::Rcpt);
        assert_eq!(
            rcpt.take(Response::Quarantine("held".into())),
            Ok(Fold::More)
        );
        assert_eq!(rcpt.quarantine(), Some("held"));
        assert_eq!(
            rcpt.take(Response::Continue),
            Ok(Fold::Done(Decision::Continue))
        );
        assert!(rcpt.into_modifications().is_empty());
        let mut end = step(Stage::EndOfMessage);
        end.take(Response::Quarantine("held".into())).unwrap();
        assert_eq!(
            end.into_modifications(),
            vec![Modification::Quarantine("held".into())]
        );
    }

    #[test]
    fn modifications_are_bounded() {
        let mut end = Step::new(Stage::EndOfMessage, &negotiated(action::ALL, 0), 100);
        assert_eq!(
            end.take(Response::ReplaceBody(vec![b'x'; 90])),
            Ok(Fold::More)
        );
        assert_eq!(
            end.take(Response::ReplaceBody(vec![b'x'; 10])),
            Err(StepError::TooMuch { bytes_max: 100 })
        );
    }
}
