require "vacation";
require "reject";

vacation "Ik ben ff weg.";
reject "Ik heb nu geen zin aan mail.";
