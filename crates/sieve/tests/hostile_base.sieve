require ["fileinto", "variables", "imap4flags", "editheader", "relational", "regex", "date", "index", "body"];
if header :matches "subject" "*present*" { set "a" "${1}"; addflag "\\Seen"; }
elsif address :domain :is "from" "example.org" { fileinto :flags "x" "INBOX.${a}"; }
if date :value "ge" :index 1 "date" "year" "1990" { addheader "X-Old" "no"; deleteheader :index 1 "x-caffeine"; }
if body :text :contains "anvil" { set :upper "b" "${a}"; }
if header :regex "subject" "^(.*)$" { fileinto "${1}"; }
keep;
