// "Copy" buttons: <button data-copy-target="ID"> copies the value of the input with that id.
(function () {
  "use strict";
  document.querySelectorAll("button[data-copy-target]").forEach(function (button) {
    button.addEventListener("click", function () {
      var source = document.getElementById(button.getAttribute("data-copy-target"));
      if (!source) {
        return;
      }
      source.select();
      var done = function () {
        button.textContent = "Copied";
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(source.value).then(done);
      } else {
        document.execCommand("copy");
        done();
      }
    });
  });
})();
