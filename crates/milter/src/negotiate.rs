//! The option negotiation (`SMFIC_OPTNEG`): what we offer, what the filter asked, and from
//! both what is sent and what is answered for the rest of the connection.

use std::fmt;

use crate::command::Command;
use crate::wire::{Stage, VERSION, VERSION_MIN, action, protocol};

/// What the MTA offers a filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offer {
    pub version: u32,
    /// The actions a filter may take (`SMFIF_*`).
    pub actions: u32,
    /// The protocol flags the MTA can honour (`SMFIP_*`).
    pub protocol: u32,
}

impl Default for Offer {
    /// Version 6, every action, and every flag we honour (Postfix milter8.c `my_actions`,
    /// `MILTER8_V6_PROTO_MASK` less `SMFIP_RCPT_REJ`: we send no rejected recipient).
    fn default() -> Offer {
        Offer {
            version: VERSION,
            actions: action::ALL,
            protocol: protocol::OFFER,
        }
    }
}

impl Offer {
    /// The `SMFIC_OPTNEG` command for this offer.
    pub fn command(&self) -> Command<'static> {
        Command::OptNeg {
            version: self.version,
            actions: self.actions,
            protocol: self.protocol,
        }
    }
}

/// Why a filter's OPTNEG answer is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NegotiationError {
    /// A version above ours, or below 2 (Postfix milter8.c: "protocol version conflict").
    Version(u32),
    /// Actions we did not offer (Postfix milter8.c: "request mask conflict").
    Actions { asked: u32, offered: u32 },
}

impl fmt::Display for NegotiationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NegotiationError::Version(version) => {
                write!(
                    f,
                    "the filter speaks protocol version {version}, not {VERSION_MIN}..={VERSION}"
                )
            }
            NegotiationError::Actions { asked, offered } => write!(
                f,
                "the filter asks for actions {asked:#x}, beyond the {offered:#x} offered"
            ),
        }
    }
}

impl std::error::Error for NegotiationError {}

/// What was agreed: fixed for the connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// The filter's version (at most ours).
    pub version: u32,
    /// The actions the filter may take.
    pub actions: u32,
    /// The filter's protocol flags, less those we did not offer.
    pub protocol: u32,
    /// Per `SMFIM_*` list (connect, HELO, MAIL, RCPT, DATA, end of message, end of headers),
    /// the macro names the filter asked for; `None` for every list when it asked for none.
    symlists: Option<[Vec<String>; 7]>,
}

impl Negotiated {
    /// Checks the filter's answer against our offer (Postfix milter8.c `milter8_connect`).
    /// Protocol flags we did not offer are dropped, as Postfix ignores them. Macro lists with
    /// an unknown number are ignored, as Postfix does; when the filter sends any list, the
    /// steps it sent none for get no macros (Postfix starts from empty lists).
    pub fn new(
        offer: &Offer,
        version: u32,
        actions: u32,
        protocol: u32,
        symlists: &[(u32, String)],
    ) -> Result<Negotiated, NegotiationError> {
        if !(VERSION_MIN..=offer.version).contains(&version) {
            return Err(NegotiationError::Version(version));
        }
        if actions & !offer.actions != 0 {
            return Err(NegotiationError::Actions {
                asked: actions,
                offered: offer.actions,
            });
        }
        let symlists = (!symlists.is_empty()).then(|| {
            let mut lists: [Vec<String>; 7] = Default::default();
            for (list, names) in symlists {
                if let Some(slot) = usize::try_from(*list).ok().and_then(|i| lists.get_mut(i)) {
                    *slot = names.split_ascii_whitespace().map(str::to_string).collect();
                }
            }
            lists
        });
        Ok(Negotiated {
            version,
            actions,
            protocol: protocol & offer.protocol,
            symlists,
        })
    }

    /// Whether the step is reported to the filter: it did not decline it, and it exists in
    /// the filter's version (DATA from version 4, unknown commands from 3; milter8.c
    /// `milter8_event_masks`). End of message always is.
    pub fn sends(&self, stage: Stage) -> bool {
        let exists = match stage {
            Stage::Data => self.version >= 4,
            Stage::Unknown => self.version >= 3,
            _ => true,
        };
        exists && self.protocol & stage.no_send_flag() == 0
    }

    /// Whether the filter answers the step (`SMFIP_NR_*` not set); end of message always is.
    pub fn replies(&self, stage: Stage) -> bool {
        self.protocol & stage.no_reply_flag() == 0
    }

    /// `SMFIP_HDR_LEADSPC`: header values go both ways with the space after the colon
    /// included; without it, one space is dropped before a value is sent and added before a
    /// value the filter gives (milter8.c `milter8_header`, `MILTER8_HDR_SPACE`).
    pub fn leading_space(&self) -> bool {
        self.protocol & protocol::HDR_LEADSPC != 0
    }

    /// Whether the filter negotiated any of `actions` (`SMFIF_*`).
    pub fn may(&self, actions: u32) -> bool {
        self.actions & actions != 0
    }

    /// Whether the macro goes to the filter at this step: every macro when the filter sent no
    /// lists, else the names on the step's list (with or without braces: `i`, `{mail_addr}`).
    pub fn wants_macro(&self, stage: Stage, name: &str) -> bool {
        let Some(lists) = &self.symlists else {
            return true;
        };
        let Some(list) = stage.symlist().and_then(|i| lists.get(i)) else {
            return false;
        };
        let bare = name.trim_start_matches('{').trim_end_matches('}');
        list.iter()
            .any(|wanted| wanted.trim_start_matches('{').trim_end_matches('}') == bare)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn negotiated(version: u32, protocol: u32) -> Negotiated {
        Negotiated::new(&Offer::default(), version, action::ADDHDRS, protocol, &[]).unwrap()
    }

    #[test]
    fn steps_declined_and_unanswered() {
        let all = negotiated(6, 0);
        for stage in [
            Stage::Connect,
            Stage::Helo,
            Stage::Mail,
            Stage::Rcpt,
            Stage::Data,
            Stage::Header,
            Stage::EndOfHeaders,
            Stage::Body,
            Stage::EndOfMessage,
        ] {
            assert!(all.sends(stage) && all.replies(stage), "{stage:?}");
        }
        let some = negotiated(
            6,
            protocol::NOHELO | protocol::NOBODY | protocol::NR_HDR | protocol::NR_RCPT,
        );
        assert!(!some.sends(Stage::Helo) && !some.sends(Stage::Body));
        assert!(some.sends(Stage::Header) && !some.replies(Stage::Header));
        assert!(some.sends(Stage::Rcpt) && !some.replies(Stage::Rcpt));
        assert!(some.sends(Stage::EndOfMessage) && some.replies(Stage::EndOfMessage));
        assert!(!some.leading_space());
        assert!(negotiated(6, protocol::HDR_LEADSPC).leading_space());
    }

    #[test]
    fn older_versions_get_no_data_step() {
        assert!(!negotiated(2, 0).sends(Stage::Data));
        assert!(!negotiated(3, 0).sends(Stage::Data));
        assert!(negotiated(4, 0).sends(Stage::Data));
        assert!(!negotiated(2, 0).sends(Stage::Unknown));
    }

    #[test]
    fn versions_and_actions_beyond_the_offer_are_refused() {
        let offer = Offer::default();
        assert_eq!(
            Negotiated::new(&offer, 7, 0, 0, &[]),
            Err(NegotiationError::Version(7))
        );
        assert_eq!(
            Negotiated::new(&offer, 1, 0, 0, &[]),
            Err(NegotiationError::Version(1))
        );
        let narrow = Offer {
            actions: action::ADDHDRS,
            ..offer
        };
        assert!(matches!(
            Negotiated::new(&narrow, 6, action::CHGBODY, 0, &[]),
            Err(NegotiationError::Actions { .. })
        ));
        // Protocol flags we did not offer are dropped.
        let got = Negotiated::new(&offer, 6, 0, protocol::RCPT_REJ | 1 << 28, &[]).unwrap();
        assert_eq!(got.protocol, 0);
    }

    #[test]
    fn macro_lists_limit_the_macros_sent() {
        let offer = Offer::default();
        let all = Negotiated::new(&offer, 6, 0, 0, &[]).unwrap();
        assert!(all.wants_macro(Stage::Mail, "{auth_authen}"));
        let listed = Negotiated::new(
            &offer,
            6,
            0,
            0,
            &[(2, "{mail_addr} i".into()), (99, "x".into())],
        )
        .unwrap();
        assert!(listed.wants_macro(Stage::Mail, "{mail_addr}"));
        assert!(listed.wants_macro(Stage::Mail, "{i}"));
        assert!(listed.wants_macro(Stage::Mail, "i"));
        assert!(!listed.wants_macro(Stage::Mail, "{auth_authen}"));
        assert!(!listed.wants_macro(Stage::Connect, "j"));
    }

    #[test]
    fn the_offer_is_postfix_s() {
        let offer = Offer::default();
        assert_eq!(offer.version, 6);
        assert_eq!(offer.actions, 0x1ff);
        assert_eq!(offer.protocol, 0x001f_f7ff);
        assert_eq!(offer.protocol & protocol::RCPT_REJ, 0);
    }
}
