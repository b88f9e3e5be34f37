// The campaign form (templates/annotation/campaign_form.html): shows only the settings of the schema
// chosen, and says what adaptive k's settings would do as they are typed. Without this script every
// group shows, under its schema's heading, and the adaptive-k lines are those of the last posted values.
(function () {
  "use strict";
  var form = document.querySelector("form.campaign-form");
  if (!form) {
    return;
  }

  var summary = document.getElementById("error-summary");
  if (summary) {
    summary.focus();
  }

  // --- one schema's settings at a time ---------------------------------------------------------------
  var schema = form.querySelector("[name=schema]");
  var groups = form.querySelectorAll("fieldset[data-schemas]");
  function showSchemaGroups() {
    groups.forEach(function (group) {
      var forSchema = group.getAttribute("data-schemas").split(" ").indexOf(schema.value) !== -1;
      // a group holding an error stays in sight, whatever the schema, so that the error can be read
      group.hidden = !forSchema && !group.querySelector(".field-error");
    });
  }
  if (schema) {
    schema.addEventListener("change", showSchemaGroups);
    showSchemaGroups();
  }

  // --- adaptive k: what the settings would do, from the server's rule ---------------------------------
  var box = form.querySelector(".stop-consequences");
  var url = form.getAttribute("data-stop-rule-url");
  var names = ["k", "k_max", "stop_confidence"];
  var timer = null;
  var asked = 0;
  function show(answer) {
    var list = box.querySelector(".stop-lines");
    var warning = box.querySelector(".stop-warning");
    list.textContent = "";
    answer.lines.forEach(function (line) {
      var item = document.createElement("li");
      item.textContent = line;
      list.appendChild(item);
    });
    warning.textContent = answer.warning;
    warning.hidden = !answer.warning;
    box.hidden = answer.lines.length === 0;
  }
  function ask() {
    var query = new URLSearchParams();
    names.forEach(function (name) {
      var input = form.querySelector("[name=" + name + "]");
      query.set(name, input ? input.value.trim() : "");
    });
    var mine = ++asked;
    fetch(url + "?" + query.toString(), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.ok ? response.json() : null;
      })
      .then(function (answer) {
        if (answer && mine === asked) {  // only the latest question's answer
          show(answer);
        }
      })
      .catch(function () {});  // offline: the lines stay as they were; the server checks on saving
  }
  if (box && url) {
    names.forEach(function (name) {
      var input = form.querySelector("[name=" + name + "]");
      if (input && !input.disabled) {
        input.addEventListener("input", function () {
          window.clearTimeout(timer);
          timer = window.setTimeout(ask, 250);
        });
      }
    });
  }
})();
