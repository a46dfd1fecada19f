import{j as r}from"./index-B9HOPBAD.js";function c({text:t}){const e=t.split(/`([^`\n]+)`/);return r.jsx(r.Fragment,{children:e.map((s,n)=>n%2?r.jsx("code",{children:s},n):s)})}export{c as P};
