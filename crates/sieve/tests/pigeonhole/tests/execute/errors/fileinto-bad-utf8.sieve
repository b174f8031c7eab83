require "fileinto";
require "variables";
require "encoded-character";

set "mailbox" "${hex:ff}rop";
fileinto "${mailbox}";

