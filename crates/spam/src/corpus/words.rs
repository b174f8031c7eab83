//! The corpus's vocabulary: senders, subjects and sentences per topic, with `{slots}` that
//! `fill` replaces. Domains are RFC 2606 names.

pub(super) const HAM_TOPICS: &[&str] = &[
    "meetings",
    "code review",
    "family",
    "invoices",
    "newsletters",
];
pub(super) const SPAM_TOPICS: &[&str] = &["pharma", "crypto", "phishing", "lottery", "seo"];

pub(super) const COLLEAGUES: &[&str] = &[
    "Alice Martin <alice@example.com>",
    "Bob Chen <bob@example.com>",
    "Carol Diaz <carol@example.com>",
    "Dave Okafor <dave@example.com>",
    "Erin Walsh <erin@example.com>",
    "Frank Muller <frank@partner.example.net>",
    "Grace Kim <grace@partner.example.net>",
    "Heidi Novak <heidi@example.com>",
];
pub(super) const REVIEWERS: &[&str] = &[
    "Forge <notifications@forge.example>",
    "Bob Chen <bob@example.com>",
    "Ivan Petrov <ivan@contributors.example.org>",
    "Judy Singh <judy@contributors.example.org>",
];
pub(super) const FAMILY: &[&str] = &[
    "Mum <mum@mail.example.net>",
    "Dad <dad@mail.example.net>",
    "Sam Doe <sam.doe@mail.example.net>",
    "Aunt Rose <rose1954@mail.example.org>",
];
pub(super) const VENDORS: &[&str] = &[
    "Hosting Billing <billing@hosting.example>",
    "Accounting <invoices@accounting.example>",
    "City Power <noreply@power.example.net>",
    "Phone Co <bills@phone.example>",
];
pub(super) const NEWSLETTERS: &[&str] = &[
    "LWN <lwn@lwn.example>",
    "This Week in Rust <twir@this-week-in-rust.example>",
    "Hacker Digest <digest@news.example.org>",
    "Crypto Weekly <editor@crypto-weekly.example>",
];
pub(super) const SHOPS: &[&str] = &[
    "Bookshop <offers@books.example>",
    "Outdoor Gear <deals@outdoor.example>",
    "Crypto Weekly <editor@crypto-weekly.example>",
];

pub(super) const MEETING_SUBJECTS: &[&str] = &[
    "Meeting on {day}",
    "Sync about {project}",
    "Agenda for {day}'s standup",
    "Can we move the {project} review?",
    "Notes from the {project} planning",
    "Quick call {day}?",
];
pub(super) const MEETING: &[&str] = &[
    "Can we meet on {day} at {n} to go over the {project} plan?",
    "I booked the small meeting room for an hour.",
    "The agenda is the release schedule, the open bugs and hiring.",
    "{name} will join remotely, the call link is in the calendar invite.",
    "Please bring the numbers for the quarterly report.",
    "Let's push the standup to half past, I have a dentist appointment.",
    "I have added the notes from last week to the shared document.",
    "Does {day} afternoon work for you and {name}?",
    "We should decide on the {project} milestone before the deadline.",
    "Thanks for the summary, I agree with the action items.",
];
pub(super) const REVIEW_SUBJECTS: &[&str] = &[
    "Re: [mailstow] Fix the {project} parser (#{n})",
    "[mailstow] {name} requested your review on #{n}",
    "Review of the {project} refactor",
    "CI failure on main ({project})",
];
pub(super) const REVIEW: &[&str] = &[
    "I left a comment on line {n} of src/{project}.rs about the error handling.",
    "The test fails on CI with an overflow in the parser, can you rebase?",
    "LGTM, merge when the checks pass.",
    "This function allocates in the loop, could we reuse the buffer?",
    "The benchmark shows a {n}% regression in throughput.",
    "Please split the refactor from the behaviour change into two commits.",
    "{name} pushed {n} commits to the branch.",
    "Why does the iterator clone every string here?",
    "Added a property test for the tokenizer edge cases.",
    "The lifetime error goes away if you borrow the slice instead.",
];
pub(super) const FAMILY_SUBJECTS: &[&str] = &[
    "Dinner on {day}",
    "Photos from the weekend",
    "{name}'s birthday",
    "Grandma's visit",
    "The garden",
];
pub(super) const FAMILY_LINES: &[&str] = &[
    "Are you coming for dinner on {day}? Dad is making lasagne.",
    "Here are the photos from the lake, the kids loved the boat.",
    "{name}'s birthday party is at our place, bring a cake if you can.",
    "Grandma arrives by train on {day} morning, can you pick her up?",
    "The tomatoes are finally ripe and the roses are blooming.",
    "We miss you, call when you have a minute.",
    "The dog chewed another shoe, we need a bigger fence.",
    "Love you, see you soon.",
    "Did you get the parcel I sent last week?",
];
pub(super) const INVOICE_SUBJECTS: &[&str] = &[
    "Your invoice {id} is available",
    "Payment received, thank you",
    "Invoice for {day}'s order",
    "Your monthly statement",
    "Payment due reminder",
];
pub(super) const INVOICE: &[&str] = &[
    "Your invoice {id} for {amount} is available in your account.",
    "The payment is due within {n} days.",
    "Thank you for your business.",
    "We received your payment of {amount}, no action is needed.",
    "You can download the PDF from the billing portal.",
    "Your account number ends in {n}.",
    "Please update your payment method before the due date to avoid interruption.",
    "If you have questions about this invoice, reply to this message.",
];
pub(super) const NEWSLETTER_SUBJECTS: &[&str] = &[
    "This week in Rust {n}",
    "LWN weekly edition for {day}",
    "Hacker digest: top stories",
    "Crypto Weekly: {coin} market update",
];
pub(super) const NEWSLETTER: &[&str] = &[
    "This week: a new release of the compiler, faster builds and better diagnostics.",
    "Read the full article on the kernel scheduler changes.",
    "{n} pull requests were merged this week.",
    "Our editor looks at {coin} regulation and what it means for investors.",
    "Upcoming conferences and meetups are listed below.",
    "You receive this newsletter because you subscribed; unsubscribe at any time.",
    "The community survey results are out, thanks to everyone who answered.",
    "A deep dive into memory allocators and fragmentation.",
];
pub(super) const PROMOTION_HAM: &[&str] = &[
    "Our spring sale starts today: {n}% off everything in the store.",
    "Free shipping on orders over {amount} this week only.",
    "As a loyal customer you get early access to the new collection.",
    "Limited offer: buy two, get one free.",
    "The {coin} price rose {n}% this week, here is our analysis.",
    "Click below to see the deals picked for you.",
    "You receive this email because you bought from us; unsubscribe at any time.",
];
pub(super) const SIGNATURES: &[&str] = &[
    "Best regards,\nAlice",
    "Cheers, Bob",
    "--\nSent from my phone",
    "Thanks,\nThe Billing Team",
    "Kind regards",
];
pub(super) const GOOD_LINK_DOMAINS: &[&str] = &[
    "lwn.example",
    "this-week-in-rust.example",
    "forge.example",
    "billing.hosting.example",
    "docs.example.com",
    "news.example.org",
    "books.example",
    "crypto-weekly.example",
];
pub(super) const HAM_MAILERS: &[&str] = &[
    "Mozilla Thunderbird 128.3",
    "Apple Mail (2.3776)",
    "K-9 Mail for Android",
    "Microsoft Outlook 16.0",
    "Forge Mailer",
];

pub(super) const PHARMA_SUBJECTS: &[&str] = &[
    "Cheap {drug} online",
    "Buy {drug} without prescription",
    "{drug} {n}mg - best price",
    "Men's health: {drug} discreet delivery",
    "V1AGRA and C1ALIS at {n}% off",
];
pub(super) const PHARMA: &[&str] = &[
    "Best prices on {drug}, no prescription needed.",
    "{drug} {n}mg only ${n} per pill, discreet shipping worldwide.",
    "Our online pharmacy ships in {n} days with full refund guarantee.",
    "Order now and get {n} free pills with every purchase!",
    "Satisfaction guaranteed or your money back.",
    "Lose weight fast with our doctor approved formula.",
    "Viagra, Cialis, Levitra: all brands at generic prices.",
];
pub(super) const CRYPTO_SUBJECTS: &[&str] = &[
    "Turn $250 into {amount} with {coin}",
    "The {coin} opportunity of the decade",
    "Guaranteed {n}% daily returns",
    "Your {coin} wallet bonus is waiting",
];
pub(super) const CRYPTO: &[&str] = &[
    "Invest in {coin} today and earn {n}% guaranteed returns every week.",
    "Our trading robot made {amount} for members last month.",
    "Send {coin} to the wallet below and receive double back instantly.",
    "Limited spots left in our exclusive investment club!",
    "Elon recommends this {coin} platform, act before the price explodes.",
    "Withdraw your profits any time, no risk, no experience needed.",
];
pub(super) const PHISHING_SUBJECTS: &[&str] = &[
    "Your {bank} account has been suspended",
    "Verify your {bank} account now",
    "Unusual sign-in activity",
    "Action required: confirm your password",
    "Your mailbox is full",
];
pub(super) const PHISHING: &[&str] = &[
    "We detected unusual activity on your {bank} account.",
    "Your account will be suspended within 24 hours unless you verify your identity.",
    "Click the link below to confirm your password and security details.",
    "Failure to comply will result in permanent account closure.",
    "Dear customer, your mailbox quota is exceeded, log in to restore access.",
    "For your security, please update your billing information immediately.",
];
pub(super) const LOTTERY_SUBJECTS: &[&str] = &[
    "Congratulations! You have won",
    "Claim your prize of {amount}",
    "WINNING NOTIFICATION",
    "Your email was selected in our annual draw",
];
pub(super) const LOTTERY: &[&str] = &[
    "Your email address won {amount} in the international lottery draw.",
    "To claim your prize contact our agent with your full name and bank details.",
    "Your winning number is {n}-{n}-{n}, keep it confidential.",
    "I am a barrister representing a deceased client with no heirs.",
    "Kindly reply with your personal information to process the transfer.",
    "This is a legitimate transaction, do not share this with anyone.",
];
pub(super) const SEO_SUBJECTS: &[&str] = &[
    "Rank #1 on Google",
    "More traffic for your website",
    "Quick question about your site",
    "Backlinks offer",
];
pub(super) const SEO: &[&str] = &[
    "I noticed your website is not ranking on the first page of Google.",
    "Our team of experts can bring you {n} visitors a month with guaranteed results.",
    "We offer high authority backlinks and SEO packages at affordable prices.",
    "Reply with YES and I will send you a free audit.",
    "We also build mobile friendly websites and apps.",
    "If you are not interested, reply REMOVE.",
];
pub(super) const BAD_DOMAINS: &[&str] = &[
    "pills-direct.example",
    "cheap-meds.example",
    "coin-profit.example",
    "secure-login-verify.example",
    "prize-claims.example",
    "rank-boost.example",
];
pub(super) const FREEMAIL: &[&str] = &["freemail.example", "webmail.example.net", "inbox.example"];
pub(super) const SPAM_TLDS: &[&str] = &["example", "test", "invalid"];
pub(super) const SPAM_NAMES: &[&str] = &[
    "Customer Service",
    "Security Team",
    "Dr. Williams",
    "Online Pharmacy",
    "Prize Department",
    "Investment Desk",
    "Support",
    "Mary",
];
pub(super) const SPAM_MAILERS: &[&str] =
    &["PHPMailer 5.2.1", "Bulk Mailer Pro 7", "The Bat! (v3.5)"];

pub(super) const FIRST_NAMES: &[&str] = &[
    "Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory",
    "Oscar", "Peggy", "Trent", "Victor", "Walter",
];
pub(super) const DAYS: &[&str] = &["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
pub(super) const PROJECTS: &[&str] = &[
    "tokenizer",
    "queue",
    "storage",
    "sieve",
    "web",
    "cluster",
    "billing",
    "onboarding",
];
pub(super) const DRUGS: &[&str] = &[
    "Viagra",
    "Cialis",
    "Xanax",
    "Valium",
    "Tramadol",
    "V1agra",
    "Phentermine",
];
pub(super) const COINS: &[&str] = &["Bitcoin", "Ethereum", "Dogecoin", "Solana", "crypto"];
pub(super) const BANKS: &[&str] = &["PayPal", "Chase", "Barclays", "Wells Fargo", "Apple ID"];

/// Ordinary words both classes use: noise, and the filler of Bayes poison.
pub(super) const FILLER: &[&str] = &[
    "about",
    "after",
    "again",
    "also",
    "always",
    "another",
    "answer",
    "around",
    "because",
    "before",
    "better",
    "between",
    "both",
    "business",
    "change",
    "company",
    "could",
    "customer",
    "different",
    "during",
    "early",
    "email",
    "enough",
    "every",
    "example",
    "family",
    "first",
    "follow",
    "found",
    "free",
    "friend",
    "great",
    "group",
    "happy",
    "help",
    "important",
    "information",
    "just",
    "know",
    "large",
    "later",
    "learn",
    "little",
    "local",
    "long",
    "look",
    "money",
    "month",
    "morning",
    "never",
    "next",
    "number",
    "offer",
    "office",
    "online",
    "order",
    "other",
    "people",
    "place",
    "please",
    "point",
    "price",
    "problem",
    "question",
    "quick",
    "really",
    "right",
    "service",
    "should",
    "small",
    "something",
    "special",
    "start",
    "still",
    "system",
    "thank",
    "thing",
    "think",
    "through",
    "time",
    "today",
    "together",
    "under",
    "update",
    "very",
    "want",
    "week",
    "where",
    "while",
    "world",
    "would",
    "year",
    "yesterday",
];
