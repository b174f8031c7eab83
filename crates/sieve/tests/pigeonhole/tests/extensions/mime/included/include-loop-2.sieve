require "foreverypart";
require "include";

foreverypart :name "friep" {
	include "include-loop-3";
}
