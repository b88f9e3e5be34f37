// The label is saved in Chorus: post the assignment to MTurk at once (the button stays as a fallback).
(function () {
  "use strict";
  var form = document.querySelector("form.mturk-submit-form");
  if (form) {
    form.submit();
  }
})();
