// jQuery UI's slider, which the ipywidgets 7 controls import, finds jQuery as a global where
// there is no AMD loader (as in the notebook pages that load it): imported first, this sets it.
import jQuery from 'jquery';

window.jQuery = window.$ = jQuery;
