// The ipywidgets 7 controls import jQuery UI's slider, an AMD or browser-global script: with
// no AMD loader it finds jQuery as a global and the jQuery UI modules it names (mouse,
// keycode, version, widget) already loaded. Imported first, this module sets the global
// and jquery-ui-deps.js, imported second, loads those modules in their order.
import jQuery from 'jquery';

window.jQuery = window.$ = jQuery;
