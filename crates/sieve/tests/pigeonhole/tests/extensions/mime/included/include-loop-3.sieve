require "foreverypart";
require "include";

foreverypart :name "frml" {
	include "include-loop-4";
}
