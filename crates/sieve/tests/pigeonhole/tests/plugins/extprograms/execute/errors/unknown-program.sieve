require "vnd.dovecot.execute";

execute "unknown";
