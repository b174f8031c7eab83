require "fileinto";
require "mailbox";

fileinto :create "foo//somedomain/org";

