require ["include"];

include :personal "rfc-ex1-always_allow";
include :global "rfc-ex1-spam_tests";
include :personal "rfc-ex1-spam_tests";
include :personal "rfc-ex1-mailing_lists";
