require "vnd.dovecot.execute";
require "variables";

# 1: invalid variable name
execute :output "wqwe-aeqwe" "frop";


